package sim

import (
	"testing"
	"time"
)

// The drain a calendar quota allows, against arithmetic done by hand: a
// load of 94 s, day reach 115 (1 January to 25 April 2027: four calendar
// months), one hour of drain before any quota.
func TestQuotaDrainHoldsOnePushOfEveryLane(t *testing.T) {
	hourly := func(n int) *VendorQuota { return &VendorQuota{Count: n, Period: "hour"} }
	for _, tt := range []struct {
		name   string
		props  int
		rooms  int
		c      ChannelSpec
		halved bool
		want   time.Duration
	}{
		{"no quota: the drain stays", 26, 4, ChannelSpec{Creds: 1}, false, time.Hour},
		// 26 lanes of one request: two periods after the load's hour.
		{"one request a lane", 26, 4, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(18)}}, false, 3*time.Hour + 10*time.Minute},
		// Seed 35: 26 lanes × 4 months = 104 requests, six periods of 18.
		{"a month a request", 26, 4, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(18), Wire: &WireSpec{Format: "opentravel"}}}, false, 7*time.Hour + 10*time.Minute},
		{"split_by month on JSON", 26, 4, ChannelSpec{Creds: 1, Keys: map[string]string{"split_by": `"month"`}, Vendor: VendorSpec{Quota: hourly(18)}}, false, 7*time.Hour + 10*time.Minute},
		// 13 lanes a credential, 115 × 4 = 460 items in messages of 62:
		// 8 a lane, 104 requests.
		{"max_items", 26, 4, ChannelSpec{Creds: 2, Keys: map[string]string{"max_items": "62"}, Vendor: VendorSpec{Quota: hourly(18)}}, false, 7*time.Hour + 10*time.Minute},
		// 4 months × ceil(31 × 4 / 62) = 8 a lane, 13 lanes: 104.
		{"max_items within a month", 26, 4, ChannelSpec{Creds: 2, Keys: map[string]string{"max_items": "62"}, Vendor: VendorSpec{Quota: hourly(18), Wire: &WireSpec{Format: "opentravel"}}}, false, 7*time.Hour + 10*time.Minute},
		// max_bytes 1024 on JSON: a body holds (1024 − 128 − 4 × 64) ÷ 64
		// = 10 days, so 460 days go as at most 2 × 46 = 92 halves: 13
		// lanes × 92 = 1,196 requests, 67 periods of 18. Seed 189 (11
		// properties on 2 credentials, an hourly quota of 11, max_bytes
		// 1024) drained for three periods while its lanes needed four:
		// the rates bucket sent 44 requests, 11 an hour, and 4 days were
		// still stale in every run.
		{"max_bytes halves on JSON", 26, 4, ChannelSpec{Creds: 2, Keys: map[string]string{"max_bytes": "1024"}, Vendor: VendorSpec{Quota: hourly(18)}}, false, 68*time.Hour + 10*time.Minute},
		// OpenTravel by month: 31 × 4 = 124 days a message, (8192 − 256 −
		// 4 × 64) ÷ 320 = 24 a body: 2 × 6 = 12 halves, 4 months: 48 a
		// lane, 13 lanes: 624 requests, 35 periods.
		{"max_bytes halves on OpenTravel", 26, 4, ChannelSpec{Creds: 2, Keys: map[string]string{"max_bytes": "8192"}, Vendor: VendorSpec{Quota: hourly(18), Wire: &WireSpec{Format: "opentravel"}}}, false, 36*time.Hour + 10*time.Minute},
		// A message that fits max_bytes whole is one request: 26 lanes of
		// one, as without it.
		{"max_bytes above the message", 26, 1, ChannelSpec{Creds: 1, Keys: map[string]string{"max_bytes": "1048576"}, Vendor: VendorSpec{Quota: hourly(18)}}, false, 3*time.Hour + 10*time.Minute},
		// A shadow channel pushes at once, but the vendor still takes 18
		// an hour: 26 lanes of one request, as when the fleet enforces.
		{"shadow mode", 26, 4, ChannelSpec{Creds: 1, Keys: map[string]string{"mode": `"shadow"`}, Vendor: VendorSpec{Quota: hourly(18), Unchecked: true}}, false, 3*time.Hour + 10*time.Minute},
		// A vendor halving its limit answers at most one 429 a push, each
		// a token of the fleet's count: 26 lanes of one request at 9 an
		// hour, three periods after the load's.
		{"a halving vendor", 26, 1, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(18)}}, true, 4*time.Hour + 10*time.Minute},
		// A quota that holds every lane in the load's own period still
		// drains to the end of the next.
		{"quota above the lanes", 4, 1, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(200)}}, false, 2*time.Hour + 10*time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := Scenario{Properties: tt.props, Drain: time.Hour, Channels: []ChannelSpec{tt.c},
				Load: Load{Duration: 94 * time.Second, WithinDays: 115, MaxDays: 7, Rooms: tt.rooms, Plans: 1}}
			if tt.halved {
				sc.Faults.HalveAt = time.Minute
			}
			quotaDrain(&sc)
			if sc.Drain != tt.want {
				t.Errorf("drain %v, want %v", sc.Drain, tt.want)
			}
		})
	}
}

// refuse-item keeps its refusals off a channel with a calendar quota (a
// quota sized for the load cannot pay for isolating refused changes
// within the drain), whichever part draws the quota: quota-5xx comes after
// refuse-item in the catalogue, and seed 264 drew both on booking.
func TestNoQuotaOnAChannelThatRefusesItems(t *testing.T) {
	cases := []Case{{Seed: 264, Parts: []string{"kinds_per_message", "lifetime", "push_timeout", "retry-after", "5xx", "refuse-item", "quota-5xx", "parity"}}}
	for seed := range uint64(300) {
		cases = append(cases, Case{Seed: seed + 1, Parts: []string{"quota", "refuse-item", "quota-5xx"}})
	}
	for _, c := range cases {
		sc, _, _, err := c.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range sc.Channels {
			if ch.Vendor.Quota != nil && !refusesNoItem(&ch) {
				t.Errorf("%s: %s has a calendar quota of %d an %s and refuses an unmapped room", c.Replay(), ch.Name, ch.Vendor.Quota.Count, ch.Vendor.Quota.Period)
			}
		}
	}
}
