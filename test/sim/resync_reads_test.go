package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A resync of one kind on a hotel connected to three channels that cover
// the same cells reads the kind's stored state once, not once a channel:
// the onboarding's planning read each hotel's year 5 times (15 of its 45
// BatchGetItems a hotel were needed), which delayed its first bulk push and
// cost a third of the resync's read units. Every channel's lane is still
// marked with all of it. The oracle: two cells × 12 months are 24
// cell-months, one BatchGetItem (at most 100 keys each).
func TestResyncReadsEachKindsStateOnceForAllItsChannels(t *testing.T) {
	m, channels := threeChannelHotel(t)
	before := m.store.Stats().Calls["state BatchGetItem"]
	r := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Kinds: []string{"rates"}, From: "2027-01-01", To: "2027-12-31"}
	_, rep, err := m.sy.Resync(context.Background(), r, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.store.Stats().Calls["state BatchGetItem"] - before; got != 1 {
		t.Errorf("the resync read the state with %d BatchGetItems, want 1 (24 cell-months of one kind, whatever the channels)", got)
	}
	if days := 365; rep.Lanes != len(channels) || rep.Dates != len(channels)*2*days {
		t.Errorf("marked %d lanes with %d dates, want %d lanes with %d (2 cells × %d days each)", rep.Lanes, rep.Dates, len(channels), len(channels)*2*days, days)
	}
}

// A resync marks the lanes of a kind that its state marks alike (every
// channel's, where each maps the same codes) with one write to the item
// they share, not one a lane: the onboarding's hotel marked its 15 lanes
// with 15 writes one after the other, and its batch of resync events
// dispatched no bulk push until the slowest was done (the full-size run's
// first bulk request 3.2 s after the resync). Each lane is still claimed by
// a bulk token of its own and scheduled. The oracle: three channels of one
// kind are one property-and-kind item, so one UpdateItem.
func TestResyncMarksAKindsLanesWithOneWrite(t *testing.T) {
	m, channels := threeChannelHotel(t)
	before := m.store.Stats().Calls["state UpdateItem"]
	r := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Kinds: []string{"rates"}, From: "2027-01-01", To: "2027-12-31"}
	tasks, rep, err := m.sy.Resync(context.Background(), r, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.store.Stats().Calls["state UpdateItem"] - before; got != 1 {
		t.Errorf("the resync marked its lanes with %d UpdateItems, want 1 (%d lanes of one property and kind)", got, len(channels))
	}
	owners := map[string]bool{}
	for _, tk := range tasks {
		owners[tk.Job.ID] = true
	}
	if rep.Lanes != len(channels) || rep.Scheduled != len(channels) || len(owners) != len(channels) {
		t.Errorf("marked %d lanes, scheduled %d, %d distinct bulk jobs; want %d of each", rep.Lanes, rep.Scheduled, len(owners), len(channels))
	}
}

// threeChannelHotel is hotel-aurora connected to three channels (opentravel,
// rates at 10/s burst 5) that map the same codes, with a year of DBL/BAR
// and SUI/BAR rates stored: a kind whose state every channel's lane shares.
func threeChannelHotel(t *testing.T) (*memLanes, []string) {
	t.Helper()
	lim := limiter.PerSecond(10, 5)
	channels := []string{"booking_com", "ota_b", "ota_c"}
	m := newMemLanes(t, mockota.Config{Limit: lim}, func(url string) string {
		chans, props := "", ""
		for i, c := range channels {
			sep := ""
			if i > 0 {
				sep = ", "
			}
			chans += fmt.Sprintf(`%s%q: {"base_url": %q, "allow_http": true, "format": "opentravel",
    "endpoints": {"rates": {"path": "/v1/rates", "limit": {"rate": %g, "burst": %d}}},
    "credentials": {"cred-1": {"token_env": "T"}}}`, sep, c, url, lim.Rate, lim.Burst)
			props += fmt.Sprintf(`%s{"channel": %q, "credential": "cred-1", "hotel_ref": "H-%d",
    "room_types": {"DBL": "DBL", "SUI": "SUI"}, "rate_plans": {"BAR": "BAR"}}`, sep, c, i)
		}
		return fmt.Sprintf(`{"channels": {%s}, "properties": {"hotel-aurora": [%s]}}`, chans, props)
	}, nil)
	for i, room := range []string{"DBL", "SUI"} {
		seq := int64(i + 1)
		c := ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: "hotel-aurora", Sequence: seq, Kind: "rates", RoomType: room, RatePlan: "BAR",
			From: "2027-01-01", To: "2027-12-31", Values: map[string]any{"amount": 100 + seq, "currency": "EUR"}}
		if _, err := m.sy.State.Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	return m, channels
}

// gatedReads holds each state read until want of them are in flight at
// once (or a second has passed), and tells the most that were.
type gatedReads struct {
	*DB
	want int

	mu       sync.Mutex
	inFlight int
	most     int
	all      chan struct{}
}

func (g *gatedReads) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	if g.inFlight == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(time.Second):
	}
	defer func() { g.mu.Lock(); g.inFlight--; g.mu.Unlock() }()
	return g.DB.BatchGetItem(ctx, in, opts...)
}

// A resync of every kind plans and marks the kinds at once: their lanes
// are items apart and their plans read state of their own, and one kind
// after the other an onboarding hotel's planning waited for three reads
// and three marks in turn while its batch of resync events held every
// bulk push back (#29). The oracle: a hotel of one channel with three
// kinds, one BatchGetItem each, has three state reads in flight at once.
func TestResyncPlansItsKindsAtOnce(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim}, func(url string) string {
		ep := func(kind string) string {
			return fmt.Sprintf(`%q: {"path": "/v1/%s", "limit": {"rate": %g, "burst": %d}}`, kind, kind, lim.Rate, lim.Burst)
		}
		return fmt.Sprintf(`{"channels": {"booking_com": {"base_url": %q, "allow_http": true,
    "endpoints": {%s, %s, %s}, "credentials": {"cred-1": {"token_env": "T"}}}},
  "properties": {"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "H-1",
    "room_types": {"DBL": "DBL"}, "rate_plans": {"BAR": "BAR"}}]}}`, url, ep("availability"), ep("restrictions"), ep("rates"))
	}, nil)
	values := map[string]map[string]any{"availability": {"available": 3}, "restrictions": {"min_los": 2}, "rates": {"amount": 100, "currency": "EUR"}}
	seq := int64(0)
	for kind, v := range values {
		seq++
		c := ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: "hotel-aurora", Sequence: seq, Kind: kind, RoomType: "DBL", RatePlan: "BAR",
			From: "2027-01-01", To: "2027-12-31", Values: v}
		if _, err := m.sy.State.Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	g := &gatedReads{DB: m.store, want: len(values), all: make(chan struct{})}
	m.sy.State = &ari.Store{DB: g, Table: "state"}
	r := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", From: "2027-01-01", To: "2027-12-31"}
	_, rep, err := m.sy.Resync(context.Background(), r, false)
	if err != nil {
		t.Fatal(err)
	}
	if g.most != len(values) {
		t.Errorf("the resync had at most %d state reads in flight at once, want %d (one a kind, all at once)", g.most, len(values))
	}
	if rep.Lanes != len(values) || rep.Scheduled != len(values) {
		t.Errorf("marked %d lanes and scheduled %d, want %d of each (%+v)", rep.Lanes, rep.Scheduled, len(values), rep)
	}
}
