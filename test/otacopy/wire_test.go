package otacopy

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Two deltas to one day: the second sets one field, the first's other
// field stays, as at the vendor.
func TestBuildWire(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, wire := range []string{mockota.WireOpenTravel, mockota.WireExpediaAR} {
		t.Run(wire, func(t *testing.T) {
			f, _ := format.Lookup(wire)
			push := func(values string, at time.Time) mockota.Request {
				r, err := f.Encode(format.Work{HotelRef: "H1", Kind: "availability", Secret: format.NewSecret("u:p"), Cells: []format.Cell{
					{RoomType: "DBL", Days: []ari.Day{{Date: "2030-02-01", Sequence: 1, Values: []byte(values)}}}}})
				if err != nil {
					t.Fatal(err)
				}
				return mockota.Request{JobID: "j", Endpoint: "availability", At: at, Status: 200, Body: r.Body}
			}
			c, err := BuildWire([]mockota.Request{push(`{"available":3,"closed":false}`, t0), push(`{"closed":true}`, t0.Add(time.Second))}, wire)
			if err != nil {
				t.Fatal(err)
			}
			d := Day{HotelRef: "H1", Kind: "availability", RoomType: "DBL", Date: "2030-02-01"}
			h, ok := c.Held(d)
			if want := Values(map[string]any{"available": 3, "closed": true}); !ok || h.Values != want {
				t.Fatalf("held %+v, want %s", h, want)
			}
			if at, ok := c.ReachedValues(d, Values(map[string]any{"available": 3, "closed": true})); !ok || !at.Equal(t0.Add(time.Second)) {
				t.Fatalf("reached at %v %v", at, ok)
			}
			if c.Items() != 2 {
				t.Fatalf("%d items", c.Items())
			}
		})
	}
	if _, err := BuildWire(nil, "json"); err == nil {
		t.Fatal("BuildWire accepted json")
	}
}
