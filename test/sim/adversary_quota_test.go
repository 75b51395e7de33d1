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
		name  string
		props int
		rooms int
		c     ChannelSpec
		want  time.Duration
	}{
		{"no quota: the drain stays", 26, 4, ChannelSpec{Creds: 1}, time.Hour},
		// 26 lanes of one request: two periods after the load's hour.
		{"one request a lane", 26, 4, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(18)}}, 3*time.Hour + 10*time.Minute},
		// Seed 35: 26 lanes × 4 months = 104 requests, six periods of 18.
		{"a month a request", 26, 4, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(18), Wire: &WireSpec{Format: "opentravel"}}}, 7*time.Hour + 10*time.Minute},
		{"split_by month on JSON", 26, 4, ChannelSpec{Creds: 1, Keys: map[string]string{"split_by": `"month"`}, Vendor: VendorSpec{Quota: hourly(18)}}, 7*time.Hour + 10*time.Minute},
		// 13 lanes a credential, 115 × 4 = 460 items in messages of 62:
		// 8 a lane, 104 requests.
		{"max_items", 26, 4, ChannelSpec{Creds: 2, Keys: map[string]string{"max_items": "62"}, Vendor: VendorSpec{Quota: hourly(18)}}, 7*time.Hour + 10*time.Minute},
		// 4 months × ceil(31 × 4 / 62) = 8 a lane, 13 lanes: 104.
		{"max_items within a month", 26, 4, ChannelSpec{Creds: 2, Keys: map[string]string{"max_items": "62"}, Vendor: VendorSpec{Quota: hourly(18), Wire: &WireSpec{Format: "opentravel"}}}, 7*time.Hour + 10*time.Minute},
		// A quota that holds every lane in the load's own period still
		// drains to the end of the next.
		{"quota above the lanes", 4, 1, ChannelSpec{Creds: 1, Vendor: VendorSpec{Quota: hourly(200)}}, 2*time.Hour + 10*time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := Scenario{Properties: tt.props, Drain: time.Hour, Channels: []ChannelSpec{tt.c},
				Load: Load{Duration: 94 * time.Second, WithinDays: 115, MaxDays: 7, Rooms: tt.rooms, Plans: 1}}
			quotaDrain(&sc)
			if sc.Drain != tt.want {
				t.Errorf("drain %v, want %v", sc.Drain, tt.want)
			}
		})
	}
}
