package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// A whole-connection resync of a year on a format that takes one calendar
// month per request (Booking.com's OpenTravel) sends each month once for
// every cell of the kind, not once per cell: three rate cells × twelve
// months are twelve requests. A cell the vendor refuses is isolated as
// before: each month is refused once, naming it, and sent again without
// it. The oracle counts the months of the year by the calendar and the
// requests at the vendor, and rebuilds the vendor's copy with
// test/otaformat's decoder, which shares nothing with the encoder.
func TestResyncSendsEachMonthOnceForAllCells(t *testing.T) {
	rooms := []string{"DBL", "SUI", "TWN"}
	months := 0
	for mo := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); mo.Year() == 2027; mo = mo.AddDate(0, 1, 0) {
		months++
	}
	tests := []struct {
		name string
		// vendorRooms are the room types the vendor knows; nil: all.
		vendorRooms []string
		requests    int
		refused     []string // rooms whose dates must never arrive
	}{
		{"every cell mapped", nil, months, nil},
		{"TWN unknown to the vendor", []string{"DBL", "SUI"}, 2 * months, []string{"TWN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := resyncYear(t, rooms, tt.vendorRooms)
			if got := len(m.ota.Requests()); got != tt.requests {
				t.Errorf("the resync sent %d requests, want %d (%d calendar months, %d cells)", got, tt.requests, months, len(rooms))
			}
			copy, err := otacopy.BuildWire(m.ota.Accepted(), mockota.WireOpenTravel)
			if err != nil {
				t.Fatal(err)
			}
			for _, room := range rooms {
				held := 0
				for d := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == 2027; d = d.AddDate(0, 0, 1) {
					if _, ok := copy.Held(otacopy.Day{HotelRef: "BK-1001", Kind: "rates", RoomType: room, RatePlan: "BAR", Date: d.Format(ari.DateLayout)}); ok {
						held++
					}
				}
				if want := 365; slices.Contains(tt.refused, room) {
					if held != 0 {
						t.Errorf("%s: the OTA holds %d dates of a room it refuses", room, held)
					}
				} else if held != want {
					t.Errorf("%s: the OTA holds %d of its %d stored dates", room, held, want)
				}
			}
			// The dead letters name the refused room's dates, each once.
			deadDates := map[string]bool{}
			for body := range m.sent.deadLetters(deadURL) {
				var letter struct {
					Payload struct{ Refused []string } `json:"payload"`
				}
				if err := json.Unmarshal([]byte(body), &letter); err != nil {
					t.Fatal(err)
				}
				for _, el := range letter.Payload.Refused {
					f := strings.Split(el, "#") // room#plan#from#to#sequence
					if len(f) != 5 || !slices.Contains(tt.refused, f[0]) {
						t.Errorf("dead letter of %q: want only a refused room's", el)
						continue
					}
					from, _ := time.Parse(ari.DateLayout, f[2])
					to, _ := time.Parse(ari.DateLayout, f[3])
					for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
						deadDates[f[0]+" "+d.Format(ari.DateLayout)] = true
					}
				}
			}
			if got, want := len(deadDates), 365*len(tt.refused); got != want {
				t.Errorf("the dead letters name %d dates, want %d (every date of the refused rooms)", got, want)
			}
		})
	}
}

// resyncYear stores a year of rates for each room (at rate plan BAR), not
// marked on any lane, resyncs the whole connection, which maps every room,
// and drains its pushes to an OpenTravel vendor that knows vendorRooms.
func resyncYear(t *testing.T, rooms, vendorRooms []string) *memLanes {
	t.Helper()
	lim := limiter.PerSecond(10, 5)
	mapped := make([]string, len(rooms))
	for i, r := range rooms {
		mapped[i] = fmt.Sprintf("%q: %q", r, r)
	}
	m := newMemLanes(t, mockota.Config{Limit: lim, Wire: &mockota.Wire{Format: mockota.WireOpenTravel, MappedRooms: vendorRooms}}, func(url string) string {
		return fmt.Sprintf(`{
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true, "format": "opentravel",
    "endpoints": {"rates": {"path": "/v1/rates", "limit": {"rate": %g, "burst": %d}}},
    "credentials": {"cred-1": {"token_env": "T"}}
  }},
  "properties": {"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001",
    "room_types": {%s}, "rate_plans": {"BAR": "BAR"}}]}
}`, url, lim.Rate, lim.Burst, strings.Join(mapped, ", "))
	}, nil)
	m.sy.Token = func(string) string { return "cred-1:pw" }
	var seq int64
	for _, room := range rooms {
		for mo := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); mo.Year() == 2027; mo = mo.AddDate(0, 1, 0) {
			seq++
			c := ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: "hotel-aurora", Sequence: seq, Kind: "rates", RoomType: room, RatePlan: "BAR",
				From: mo.Format(ari.DateLayout), To: mo.AddDate(0, 1, -1).Format(ari.DateLayout), Values: map[string]any{"amount": 100 + seq, "currency": "EUR"}}
			if _, err := m.sy.State.Apply(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	body, err := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Kinds: []string{"rates"}, From: "2027-01-01", To: "2027-12-31"}.Event(m.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}})
	m.drain(100)
	return m
}
