package format_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// summary is what each request carries: "kind room:first..last(n)" per cell.
func summary(reqs []format.Request) []string {
	var out []string
	for _, r := range reqs {
		var parts []string
		for _, c := range r.Work.Cells {
			k := c.Kind
			if k == "" {
				k = r.Work.Kind
			}
			parts = append(parts, fmt.Sprintf("%s %s:%s..%s(%d)", k, c.RoomType, c.Days[0].Date, c.Days[len(c.Days)-1].Date, len(c.Days)))
		}
		out = append(out, strings.Join(parts, " + "))
	}
	return out
}

func TestEncodeShapes(t *testing.T) {
	two := []format.Cell{
		{RoomType: "A", Days: days("2027-01-29", "2027-02-02", `{"available":1}`)},
		{RoomType: "B", Days: days("2027-02-01", "2027-02-03", `{"available":2}`)},
	}
	mixed := []format.Cell{
		{RoomType: "A", Kind: "availability", Days: days("2027-01-01", "2027-01-02", `{"available":1}`)},
		{RoomType: "A", RatePlan: "P", Kind: "restrictions", Days: days("2027-01-01", "2027-01-02", `{"min_los":2}`)},
	}
	tests := []struct {
		name   string
		format string
		cells  []format.Cell
		shape  format.Shape
		want   []string
	}{
		{"opentravel splits by month by default", format.OpenTravel, two, format.Shape{},
			[]string{"availability A:2027-01-29..2027-01-31(3)", "availability A:2027-02-01..2027-02-02(2) + availability B:2027-02-01..2027-02-03(3)"}},
		{"split_by none keeps months together", format.OpenTravel, two, format.Shape{SplitBy: format.SplitNone},
			[]string{"availability A:2027-01-29..2027-02-02(5) + availability B:2027-02-01..2027-02-03(3)"}},
		{"expedia-ar splits by month when asked", format.ExpediaAR, two, format.Shape{SplitBy: format.SplitMonth},
			[]string{"availability A:2027-01-29..2027-01-31(3)", "availability A:2027-02-01..2027-02-02(2) + availability B:2027-02-01..2027-02-03(3)"}},
		{"max_items cuts a cell's dates", format.JSON, two, format.Shape{MaxItems: 3},
			[]string{"availability A:2027-01-29..2027-01-31(3)", "availability A:2027-02-01..2027-02-02(2) + availability B:2027-02-01..2027-02-01(1)", "availability B:2027-02-02..2027-02-03(2)"}},
		{"kinds apart by default", format.ExpediaAR, mixed, format.Shape{},
			[]string{"availability A:2027-01-01..2027-01-02(2)", "restrictions A:2027-01-01..2027-01-02(2)"}},
		{"kinds together when allowed", format.ExpediaAR, mixed, format.Shape{KindsPerMessage: 2},
			[]string{"availability A:2027-01-01..2027-01-02(2) + restrictions A:2027-01-01..2027-01-02(2)"}},
		{"max_bytes halves until each body fits", format.JSON, two, format.Shape{MaxBytes: 250},
			[]string{"availability A:2027-01-29..2027-01-30(2)", "availability A:2027-01-31..2027-02-01(2)", "availability A:2027-02-02..2027-02-02(1) + availability B:2027-02-01..2027-02-01(1)", "availability B:2027-02-02..2027-02-03(2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := format.Work{HotelRef: "H", Kind: "availability", Secret: format.NewSecret("u:p"), Cells: tt.cells}
			reqs, err := format.Encode(lookup(t, tt.format), w, tt.shape)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(reqs); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			total := 0
			for _, r := range reqs {
				total += r.Work.Items()
				if tt.shape.MaxBytes > 0 && len(r.Body) > tt.shape.MaxBytes && r.Work.Items() > 1 {
					t.Errorf("a body of %d bytes, over max_bytes %d", len(r.Body), tt.shape.MaxBytes)
				}
			}
			if total != 8 && total != 4 {
				t.Errorf("%d items in all: the split lost or repeated some", total)
			}
		})
	}
}

// A format whose message carries one kind refuses mixed kinds instead of
// sending them under the wrong one.
func TestOneKindFormatsRefuseMixedKinds(t *testing.T) {
	w := format.Work{HotelRef: "H", Kind: "availability", Secret: format.NewSecret("u:p"), Cells: []format.Cell{
		{RoomType: "A", Days: []ari.Day{day("2027-01-01", `{"available":1}`)}},
		{RoomType: "A", RatePlan: "P", Kind: "rates", Days: []ari.Day{day("2027-01-01", `{"amount":"1","currency":"EUR"}`)}},
	}}
	for _, name := range []string{format.JSON, format.OpenTravel} {
		if _, err := format.Encode(lookup(t, name), w, format.Shape{KindsPerMessage: 3}); err == nil || errors.Is(err, format.ErrUnexpressible) || !strings.Contains(err.Error(), "kinds_per_message") {
			t.Errorf("%s: %v, want an error naming kinds_per_message", name, err)
		}
	}
}
