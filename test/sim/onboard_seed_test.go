package sim

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// An onboarding hotel's history put as month items (seedState) is the
// state its changes applied through ari.Store.Apply leave: the same items,
// byte for byte, the same sizes for billing, and the same days read back.
// Availability on an XML channel is the room type's cell (no rate plan);
// 45 days end within a month.
func TestOnboardSeedReadsBackAsApplied(t *testing.T) {
	for _, tt := range []struct {
		name string
		wire *WireSpec
		days int
	}{
		{"json, a year", nil, 365},
		{"opentravel, a month and a half", &WireSpec{Format: "opentravel"}, 45},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			sc := Scenario{Seed: 7, Channels: []ChannelSpec{{Name: "booking_com", Kinds: allKinds()}}}
			sc.Channels[0].Vendor.Wire = tt.wire
			o := Onboard{Properties: 2, Rooms: 2, Plans: 2, Days: tt.days}
			seeded, applied := NewDB(rand.New(rand.NewPCG(1, 2)), Latency{}), NewDB(rand.New(rand.NewPCG(1, 2)), Latency{})
			for _, db := range []*DB{seeded, applied} {
				if err := ari.CreateTable(ctx, db, "state"); err != nil {
					t.Fatal(err)
				}
			}
			var changes []ari.Change
			put := func(ch ari.Change, _ rowKey, _ int32) error {
				changes = append(changes, ch)
				if err := seeded.seedState("state", ch); err != nil {
					return err
				}
				_, err := (&ari.Store{DB: applied, Table: "state"}).Apply(ctx, ch)
				return err
			}
			s := &sim{sc: sc, seq: map[int32]int64{}}
			if err := s.onboardHistory(o, put); err != nil {
				t.Fatal(err)
			}
			if n := len(changes); n != 2*(2*4+2*2) && n != 2*(2+2*4) {
				t.Fatalf("the history has %d cells", n)
			}
			var ranges []ari.Range
			for _, ch := range changes {
				// A day on either side, which neither holds.
				ranges = append(ranges, ari.Range{Cell: ch.Cell(), From: "2026-12-31", To: day0.AddDate(0, 0, tt.days).Format(ari.DateLayout)})
			}
			unput := len(seeded.unput)
			want, err := (&ari.Store{DB: applied, Table: "state"}).Read(ctx, ranges)
			if err != nil {
				t.Fatal(err)
			}
			got, err := (&ari.Store{DB: seeded, Table: "state"}).Read(ctx, ranges)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the seeded hotels read back %d cells, the applied ones %d, and they differ", len(got), len(want))
			}
			for _, ch := range changes {
				if n := len(want[ch.Cell()]); n != tt.days {
					t.Errorf("%s reads back %d days, want %d", ch.Cell(), n, tt.days)
				}
			}
			if n := len(seeded.unput); n != unput || n == 0 {
				t.Errorf("reading the seeded items put %d of %d into minidyn: the kept items answer reads", unput-n, unput)
			}
			// The kept item and, once put, minidyn's are the applied one.
			for _, ch := range changes {
				items, err := ari.MonthItems(ch)
				if err != nil {
					t.Fatal(err)
				}
				for _, item := range items {
					key := keyOf(applied.keys["state"], item)
					sk := sizeKey("state", key)
					want := applied.fromMinidyn("state", key)
					for _, got := range []struct {
						where string
						item  map[string]types.AttributeValue
					}{{"kept", seeded.items[sk]}, {"in minidyn", seeded.fromMinidyn("state", key)}} {
						if !reflect.DeepEqual(got.item, want) {
							t.Errorf("%s: the seeded item %s %s differs from the applied one:\n got %v\nwant %v", ch.EventID, sk, got.where, itemText(got.item), itemText(want))
						}
					}
					if seeded.sizes[sk] != applied.sizes[sk] {
						t.Errorf("%s: the seeded item %s is kept as %d bytes, the applied one as %d", ch.EventID, sk, seeded.sizes[sk], applied.sizes[sk])
					}
				}
			}
			if len(seeded.unput) != 0 {
				t.Errorf("%d seeded items not put into minidyn after each was read from it", len(seeded.unput))
			}
			if len(seeded.sizes) != len(applied.sizes) {
				t.Errorf("the seed stored %d items, Apply %d", len(seeded.sizes), len(applied.sizes))
			}
		})
	}
}

// itemText renders an item's attributes for a message.
func itemText(item map[string]types.AttributeValue) map[string]string {
	out := map[string]string{}
	for n, v := range item {
		out[n] = valueText(v)
	}
	return out
}

// Seeding a day the store already holds is refused: the seed puts items
// whole, so it would overwrite a newer sequence Apply's guard keeps.
func TestOnboardSeedRefusesAStoredMonth(t *testing.T) {
	ctx := context.Background()
	db := NewDB(rand.New(rand.NewPCG(1, 2)), Latency{})
	if err := ari.CreateTable(ctx, db, "state"); err != nil {
		t.Fatal(err)
	}
	ch := ari.Change{EventID: "e1", PropertyID: "p-0", Sequence: 2, Kind: "rates", RoomType: "DBL", RatePlan: "BAR",
		From: "2027-01-30", To: "2027-02-02", Values: map[string]any{"value": 1}}
	if _, err := (&ari.Store{DB: db, Table: "state"}).Apply(ctx, ch); err != nil {
		t.Fatal(err)
	}
	ch.EventID, ch.Sequence, ch.From, ch.To = "e2", 1, "2027-02-10", "2027-02-11"
	if err := db.seedState("state", ch); err == nil {
		t.Error("a seed over a stored month was accepted")
	}
}
