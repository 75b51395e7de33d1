package lane

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An element is stored in its lane's string set of pending elements (the
// item's d attribute) as its String form, which ParseElement reads back.

// Element is one change's range of one cell: what a push must send.
type Element struct {
	RoomType, RatePlan string
	From, To           string
	// Sequence is the change's; BulkSequence for a resync's element, which
	// names no change: its push sends the stored state of its dates.
	Sequence int64
}

// BulkSequence is the sequence of a resync's elements (Element.Bulk).
// Changes start at 1, so no change's element is ever taken for one.
const BulkSequence = 0

// Bulk reports whether e is a resync's: pushed at the bulk class, in
// tokens live pushes leave (docs/design.md, "Resync: the bulk class").
func (e Element) Bulk() bool { return e.Sequence == BulkSequence }

func (e Element) String() string {
	return e.RoomType + "#" + e.RatePlan + "#" + e.From + "#" + e.To + "#" + strconv.FormatInt(e.Sequence, 10)
}

// ParseElement reads an element back from its String form.
func ParseElement(s string) (Element, error) {
	f := strings.Split(s, "#")
	if len(f) != 5 {
		return Element{}, fmt.Errorf("lane element %q: want 5 fields", s)
	}
	seq, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return Element{}, fmt.Errorf("lane element %q: %w", s, err)
	}
	return Element{RoomType: f[0], RatePlan: f[1], From: f[2], To: f[3], Sequence: seq}, nil
}

// uniqueElements drops repeats, which a string set refuses.
func uniqueElements(els []Element) []Element {
	seen := make(map[Element]bool, len(els))
	out := els[:0:0]
	for _, e := range els {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

func elementSet(els []Element) types.AttributeValue {
	set := make([]string, len(els))
	for i, e := range els {
		set[i] = e.String()
	}
	return &types.AttributeValueMemberSS{Value: set}
}
