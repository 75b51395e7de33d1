package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// DynamoDB evaluates every action of an update expression against the
// item as it was before the update ("SET #t = #t + :n, #b = #t + :n"
// sets both to the old t plus n). minidyn v0.8.2 applies a SET clause's
// actions left to right, so an action that reads an attribute an earlier
// action set reads the new value. orderSets puts every action that reads
// an attribute before the action that sets it, which minidyn then
// evaluates as DynamoDB does. A cycle (a swap) has no such order: the
// simulation refuses it rather than answer what DynamoDB would not.

// operandToken is a word of an action's right-hand side: a value (:v), a
// name placeholder (#n), a bare name or a function.
var operandToken = regexp.MustCompile(`[:#]?[A-Za-z_]\w*`)

// operandRefs are the attributes rhs reads: its name placeholders and
// bare names, not its values and functions.
func operandRefs(rhs string) []string {
	var out []string
	for _, m := range operandToken.FindAllStringIndex(rhs, -1) {
		w := rhs[m[0]:m[1]]
		if w[0] == ':' || strings.HasPrefix(strings.TrimSpace(rhs[m[1]:]), "(") {
			continue
		}
		out = append(out, w)
	}
	return out
}

// setOrderCache holds orderSets by expression: the SDK sends a few
// expressions many times.
var setOrderCache sync.Map // string → string

func orderSets(update string) string {
	if v, ok := setOrderCache.Load(update); ok {
		return v.(string)
	}
	out := reorderSets(update)
	setOrderCache.Store(update, out)
	return out
}

func reorderSets(update string) string {
	idx := clauseKeyword.FindAllStringSubmatchIndex(update, -1)
	for i, m := range idx {
		if update[m[2]:m[3]] != "SET" {
			continue
		}
		end := len(update)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		actions := splitTop(update[m[1]:end])
		if len(actions) < 2 {
			return update
		}
		targets := make([]string, len(actions))
		reads := make([][]string, len(actions))
		for j, a := range actions {
			lhs, rhs, ok := strings.Cut(a, "=")
			if !ok {
				return update // not an action minidyn will take either
			}
			targets[j] = topName(strings.TrimSpace(lhs))
			reads[j] = operandRefs(rhs)
		}
		// Kahn's algorithm, stable: action j must run before action k
		// when j reads what k sets.
		before := make([][]int, len(actions)) // k → the js that must precede it
		for j := range actions {
			for k := range actions {
				if j != k && slices.Contains(reads[j], targets[k]) {
					before[k] = append(before[k], j)
				}
			}
		}
		done := make([]bool, len(actions))
		var order []string
		for len(order) < len(actions) {
			progress := false
			for k := range actions {
				if done[k] {
					continue
				}
				ready := true
				for _, j := range before[k] {
					ready = ready && done[j]
				}
				if ready {
					done[k], progress = true, true
					order = append(order, strings.TrimSpace(actions[k]))
					break
				}
			}
			if !progress {
				panic(fmt.Sprintf("sim: the SET actions of %q read each other's targets in a cycle: minidyn applies them in order, DynamoDB on the item before; DB cannot answer as DynamoDB would", update))
			}
		}
		return update[:m[1]] + " " + strings.Join(order, ", ") + " " + update[end:]
	}
	return update
}

// splitTop splits s at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[from:i])
				from = i + 1
			}
		}
	}
	return append(out, s[from:])
}

// topName is a document path's top-level attribute (#a of #a.b[1]).
func topName(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}
