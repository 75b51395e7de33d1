package sim

import (
	"testing"
	"time"
)

// The drain an overloading vendor's silences allow, against arithmetic
// done by hand: a load of 94 s, day reach 115 days of 4 rooms (one
// request a lane's push), one hour of drain before.
func TestSilenceDrainHoldsEverySilence(t *testing.T) {
	for _, tt := range []struct {
		name  string
		props int
		c     ChannelSpec
		want  time.Duration
	}{
		{"no overload: the drain stays", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "huge"}}, time.Hour},
		{"a Retry-After the fleet reads as a date: the drain stays", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "date", Overload: 0.05}}, time.Hour},
		// 26 requests at 5%: 1.37 429s on average, σ 1.17, 4.88 counted
		// with three σ: 5, and the box's own: 6 silences of 15 minutes.
		{"26 lanes at 5%", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "huge", Overload: 0.05}}, 94*time.Second + 6*15*time.Minute + 10*time.Minute},
		// Seed 103's shape: 3 properties × 64 connections on one
		// credential, 192 requests: 10.1 on average, σ 3.18, 19.6
		// counted: 20, and one: 21 silences.
		{"64 connections at 5%", 3, ChannelSpec{Creds: 1, Connections: 64, Vendor: VendorSpec{RetryAfter: "huge", Overload: 0.05}}, 94*time.Second + 21*15*time.Minute + 10*time.Minute},
		// 9 properties × 64 connections on one credential, 576 requests:
		// 30.3 on average, σ 5.51, 46.8 counted: 47, and one: 48
		// silences of the 2 minutes asked. Before, a penalty short of a
		// day counted none, and seed 42 (2 minutes at 5%, 42 minutes of
		// its busiest bucket's drain silent) went past the hour.
		{"2-minute penalties at 5%", 9, ChannelSpec{Creds: 1, Connections: 64, Vendor: VendorSpec{Overload: 0.05, Penalty: 2 * time.Minute}}, 94*time.Second + 48*2*time.Minute + 10*time.Minute},
		{"2-minute penalties at 5% asked as a date", 9, ChannelSpec{Creds: 1, Connections: 64, Vendor: VendorSpec{RetryAfter: "date", Overload: 0.05, Penalty: 2 * time.Minute}}, 94*time.Second + 48*121*time.Second + 10*time.Minute},
		// A concurrency cap the config does not name, a day asked of each
		// 429 (seeds 332, 380): each of the 26 requests may meet a silence
		// of its own when every lane is due at a silence's end, and one: 27.
		{"a hidden concurrency cap", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "huge", InFlight: 1}}, 94*time.Second + 27*15*time.Minute + 10*time.Minute},
		{"a hidden concurrency cap asking a second of each 429: the drain stays", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "date", InFlight: 1}}, time.Hour},
		// 26 requests at 5% (6 silences, as above) and 26 for the cap.
		{"a hidden concurrency cap at 5%", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "huge", Overload: 0.05, InFlight: 1}}, 94*time.Second + 32*15*time.Minute + 10*time.Minute},
		// A shadow channel pushes at once, whatever a 429 asks.
		{"shadow mode", 26, ChannelSpec{Creds: 1, Vendor: VendorSpec{RetryAfter: "huge", Overload: 0.05, Unchecked: true}}, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := Scenario{Properties: tt.props, Drain: time.Hour, Channels: []ChannelSpec{tt.c},
				Load: Load{Duration: 94 * time.Second, WithinDays: 115, MaxDays: 7, Rooms: 4, Plans: 1}}
			silenceDrain(&sc)
			if sc.Drain != tt.want {
				t.Errorf("drain %v, want %v", sc.Drain, tt.want)
			}
		})
	}
}
