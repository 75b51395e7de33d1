package lane

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits on each expression of a request (condition, update,
// ...): its length as written (the placeholders, not what they stand
// for), and the operators and functions in it.
const (
	maxExpressionBytes     = 4096
	maxExpressionOperators = 300
)

// marksPerWrite is how many lanes one Mark write marks: as many as keep
// its update expression within maxExpressionBytes (about 86 bytes a
// lane). A property and kind with more lanes is marked with several
// writes to its one item, each lane's in one of them.
var marksPerWrite = perWrite(func(n int) []string {
	return []string{markUpdate(map[string]string{}, map[string]types.AttributeValue{}, make([]ID, n), func(ID) string { return "" })}
})

// perWrite is the most lanes whose write stays within DynamoDB's limits
// in every expression exprs(n) gives (at least 1): expressions grow with
// each lane, so the first n past a limit bounds it.
func perWrite(exprs func(n int) []string) int {
	for n := 1; ; n++ {
		for _, e := range exprs(n) {
			if len(e) > maxExpressionBytes || operators(e) > maxExpressionOperators {
				return max(1, n-1)
			}
		}
	}
}

// operators counts what DynamoDB counts against maxExpressionOperators
// in the expressions this package writes, or more: AND, OR, NOT, each
// comparator or = (an assignment too), and each function call.
func operators(expr string) int {
	n := 0
	for _, w := range strings.Fields(expr) {
		switch {
		case w == "AND" || w == "OR" || w == "NOT" || w == "=" || w == "<>" || w == "<" || w == "<=" || w == ">" || w == ">=":
			n++
		default:
			for i := 1; i < len(w); i++ {
				if w[i] == '(' && (w[i-1] == '_' || 'a' <= w[i-1] && w[i-1] <= 'z') {
					n++ // a function; a bare ( groups
				}
			}
		}
	}
	return n
}

// chunks cuts s into runs of at most n, in order.
func chunks[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > n {
		out = append(out, s[:n:n])
		s = s[n:]
	}
	return append(out, s)
}
