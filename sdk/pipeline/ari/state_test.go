package ari

import (
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MonthItems lays a change out as the state table holds it: one item per
// month of its range, keyed by cell and month, each day's sequence and
// values under its own attributes, and nothing for days outside the range.
func TestMonthItemsHoldEachDayOfTheRangeInItsMonth(t *testing.T) {
	c := Change{EventID: "e1", PropertyID: "hotel-aurora", Sequence: 42, Kind: "rates", RoomType: "DBL", RatePlan: "BAR",
		From: "2027-01-30", To: "2027-02-02", Values: map[string]any{"amount": 120, "currency": "EUR"}}
	items, err := MonthItems(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		month string
		attrs []string
	}{
		{"2027-01", []string{"pk", "s30", "s31", "sk", "v30", "v31"}},
		{"2027-02", []string{"pk", "s01", "s02", "sk", "v01", "v02"}},
	}
	if len(items) != len(want) {
		t.Fatalf("%d items, want %d", len(items), len(want))
	}
	for i, w := range want {
		item := items[i]
		if got := slices.Sorted(maps.Keys(item)); !slices.Equal(got, w.attrs) {
			t.Errorf("%s holds %v, want %v", w.month, got, w.attrs)
		}
		if pk, sk := item[PartitionKey].(*types.AttributeValueMemberS), item[SortKey].(*types.AttributeValueMemberS); pk.Value != c.Cell() || sk.Value != w.month {
			t.Errorf("item %d keyed %q %q, want %q %q", i, pk.Value, sk.Value, c.Cell(), w.month)
		}
		for _, d := range []string{w.attrs[1], w.attrs[2]} {
			day, ok, err := dayOf(item, w.month+"-"+d[1:])
			if err != nil || !ok || day.Sequence != 42 || string(day.Values) != `{"amount":120,"currency":"EUR"}` {
				t.Errorf("%s-%s reads %+v (%v, %v)", w.month, d[1:], day, ok, err)
			}
		}
	}
}
