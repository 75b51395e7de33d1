package sim

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// A hotel resynced whole maps only the codes its connection names, so the
// mapping must name every room type and rate plan any of the run's waves
// sends it, or the pipeline rightly dead-letters those changes as unmapped
// and the ledger finds their days stale (seed 249: a bulk upload of DBL
// and TWN beside a load of DBL alone, 600 days).
func TestWholeResyncMapsEveryCodeTheRunSends(t *testing.T) {
	onboard := func() *Onboard { return &Onboard{Properties: 1, Rooms: 1, Plans: 1, Days: 31, Whole: true} }
	for _, tt := range []struct {
		name         string
		sc           Scenario
		rooms, plans []string
	}{
		{"load alone", Scenario{Load: Load{Rooms: 1, Plans: 2}, Onboard: onboard()},
			[]string{"DBL"}, []string{"BAR", "NRF"}},
		{"onboarding past the load", Scenario{Load: Load{Rooms: 1, Plans: 1}, Onboard: &Onboard{Properties: 1, Rooms: 2, Plans: 1, Whole: true}},
			[]string{"DBL", "TWN"}, []string{"BAR"}},
		{"bulk upload past the load's rooms", Scenario{Load: Load{Rooms: 1, Plans: 2}, Onboard: onboard(), Bulks: []Bulk{{Rooms: 2, Days: 300}}},
			[]string{"DBL", "TWN"}, []string{"BAR", "NRF"}},
		{"burst past the load's rooms and plans", Scenario{Load: Load{Rooms: 1, Plans: 1}, Onboard: onboard(), Burst: &Burst{Properties: 1, Rooms: 3, Plans: 2}},
			[]string{"DBL", "STE", "TWN"}, []string{"BAR", "NRF"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.sc.Properties = 1
			tt.sc.Channels = []ChannelSpec{{Name: "booking", Kinds: []string{"rates"}, Creds: 1, Rate: 1, Burst: 1}}
			var cfg struct {
				Properties map[string][]struct {
					RoomTypes map[string]string `json:"room_types"`
					RatePlans map[string]string `json:"rate_plans"`
				} `json:"properties"`
			}
			if err := json.Unmarshal([]byte(connections(tt.sc)), &cfg); err != nil {
				t.Fatal(err)
			}
			conn := cfg.Properties[propID(0)][0]
			if got := slices.Sorted(maps.Keys(conn.RoomTypes)); !slices.Equal(got, tt.rooms) {
				t.Errorf("room types mapped %v, want %v", got, tt.rooms)
			}
			if got := slices.Sorted(maps.Keys(conn.RatePlans)); !slices.Equal(got, tt.plans) {
				t.Errorf("rate plans mapped %v, want %v", got, tt.plans)
			}
		})
	}
}
