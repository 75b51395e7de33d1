package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/otapush/otapushtest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// itemsWork is a lane with an endless backlog of one-item changes: each
// push renders up to items of them, and can carry fewer.
type itemsWork struct{ items int }

func (w itemsWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	return j, Payload{Body: []byte("items:" + strconv.Itoa(w.items)), Items: w.items}, nil
}

func (itemsWork) Shrink(_ context.Context, _ job.Job, _ Payload, items int) (Payload, error) {
	if items < 1 {
		return Payload{}, &TooBigError{Items: 1}
	}
	return Payload{Body: []byte("items:" + strconv.Itoa(items)), Items: items}, nil
}

func (itemsWork) Done(context.Context, job.Job, Payload) (*job.Job, error) { return nil, nil }
func (itemsWork) Hold(context.Context, job.Job, time.Time) error           { return nil }

// itemsVendor records each push as the vendor meters it: one arrival per
// item the body carries, read from the body (not from what the dispatcher
// says it paid), and the tokens each request would cost a retry.
type itemsVendor struct {
	clock  clock
	at     []time.Time
	items  []int
	tokens []int
}

func (v *itemsVendor) Push(_ context.Context, req otapush.Request) (otapush.Response, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(string(req.Body), "items:"))
	if err != nil {
		return otapush.Response{}, fmt.Errorf("body %q: %v", req.Body, err)
	}
	for range n {
		v.at = append(v.at, v.clock.Now())
	}
	v.items, v.tokens = append(v.items, n), append(v.tokens, req.Tokens)
	return otapush.Response{Status: 200, Attempts: 1}, nil
}

// itemsRoute is an endpoint metered by items, 40 items/s with a burst of
// 20, one token an item, paced locally while the store is down.
var itemsRoute = Route{Bucket: limiter.Bucket{Key: "bk#c#rates", Limit: limiter.PerSecond(40, 20)}, URL: "http://ota.invalid",
	Header: http.Header{}, ItemWeight: 1, LocalShare: true}

// With the store down, a local-share push on an endpoint metered by items
// pays the local share for every item it sends: one that took a single
// token and counted a stale j.Tokens from an earlier slot as held would
// send 8 items on one token. Each process of 2 has a share of 20 items/s,
// burst 10: the items it sends, counted by the vendor's own window check,
// stay within it.
func TestItemsLocalShareNeverSendsUnpaidItems(t *testing.T) {
	for _, items := range []int{8, 30} {
		t.Run(fmt.Sprintf("%d items pending", items), func(t *testing.T) {
			c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
			vendor := &itemsVendor{clock: c}
			// A store that cannot be reached.
			down := bucketAt(t, c, itemsRoute.Bucket, 0, limitertest.WithFault(func(string, string) error { return storeDown() }))
			d := &worker{&Dispatcher{Limiter: down, Pusher: vendor, Queue: &fakeQueue{},
				Policy: DefaultPolicy, LocalShare: fallback.New(2), Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(down)}, itemsWork{items: items}, fixedRoute(itemsRoute)}
			start := c.Now()
			for c.Now().Sub(start) < 10*time.Second {
				// A job back from an earlier slot: it still says the 20
				// tokens that slot held.
				j := job.Job{ID: "lane@t", Channel: "bk", Credential: "c", Endpoint: "rates", FirstSeen: c.Now(), Items: items, Hold: job.Hold{Tokens: 20}}
				res, err := d.HandleJob(t.Context(), j)
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome == Deferred {
					_ = c.Sleep(t.Context(), max(res.Wait, time.Millisecond))
				}
			}
			if len(vendor.at) == 0 {
				t.Fatal("nothing was pushed under the local share")
			}
			share := window.Limit{Rate: 20, Burst: 10}
			if err := window.Check(vendor.at, share); err != nil {
				t.Fatalf("one process's items under its local share: %v", err)
			}
			// A retry resends the whole body: each attempt pays for it
			// (item 1).
			if fmt.Sprint(vendor.tokens) != fmt.Sprint(vendor.items) {
				t.Fatalf("tokens a retry would pay %v, want the items each push carried %v", vendor.tokens, vendor.items)
			}
			w, _ := window.Fullest(vendor.at, share)
			t.Logf("%d items in %d pushes over 10 s; fullest window %v", len(vendor.at), len(vendor.tokens), w)
		})
	}
}

// The first booking after an outage must book the pushes the local share
// let through, as a single reservation does (pendingLocal): a batch that
// books them not lets the shared bucket, full again, grant its whole burst
// on top of them. The vendor sees the local pushes when they went out and
// the batch's jobs at their slots; its own window check (4/s, burst 8)
// must hold over both.
func TestPrebookAfterOutageCountsLocalGrants(t *testing.T) {
	c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
	route := plain
	route.LocalShare = true
	var down atomic.Bool // the store is down until the local share has pushed
	down.Store(true)
	b := bucketAt(t, c, route.Bucket, 0, limitertest.WithFault(func(string, string) error {
		if down.Load() {
			return storeDown()
		}
		return nil
	}))
	vendor := &timedPusher{clock: c, t0: c.Now()}
	pacer := fallback.New(1)
	d := &worker{&Dispatcher{Limiter: b, Pusher: vendor, Queue: &fakeQueue{}, Policy: DefaultPolicy,
		LocalShare: pacer, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(b)}, nil, fixedRoute(route)}
	for c.Now().Sub(vendor.t0) < 3*time.Second {
		res, err := d.HandleJob(t.Context(), testJob(c.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == Deferred {
			_ = c.Sleep(t.Context(), res.Wait)
		}
	}
	local := len(vendor.at)
	if local < 8 {
		t.Fatalf("%d local pushes in the outage, want the share's pace (4/s)", local)
	}
	down.Store(false) // the store is back, full: it never saw the local pushes
	jobs := make([]job.Job, 8)
	idx := make([]int, len(jobs))
	for i := range jobs {
		jobs[i] = testJob(c.Now())
		jobs[i].ID, idx[i] = fmt.Sprintf("job-%d", i), i
	}
	tasks := d.tasks(jobs)
	bookAll(t.Context(), d.dueGroups(b.ReserveBatch, tasks, idx))
	jobs = jobsOf(tasks)
	var at []time.Time
	for _, dt := range vendor.at {
		at = append(at, vendor.t0.Add(dt))
	}
	booked := 0
	for _, j := range jobs {
		if !j.Hold.At.IsZero() {
			at, booked = append(at, j.Hold.At), booked+1
		}
	}
	if booked != len(jobs) {
		t.Fatalf("the batch gave %d of %d jobs a slot, want all (15 min ahead are free)", booked, len(jobs))
	}
	lim := window.Limit{Rate: 4, Burst: 8}
	if err := window.Check(at, lim); err != nil {
		t.Fatalf("%d local pushes, then a batch of %d: %v", local, len(jobs), err)
	}
	if p := pacer.Pending(route.Bucket); p != 0 {
		t.Fatalf("%d local grants still pending after the batch booked them", p)
	}
}

// monthsWork is a lane with an endless backlog of one-item changes whose
// push is split into messages (a format's split by month), the first of
// first items, each later one of month items, up to total items; Shrink
// renders fewer items the same way.
type monthsWork struct{ first, month, total int }

func (w monthsWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	return j, w.render(w.total), nil
}

func (w monthsWork) render(total int) Payload {
	p := Payload{Items: total}
	for left, size := total, w.first; left > 0; left, size = left-size, w.month {
		size = min(size, left)
		p.Messages = append(p.Messages, Message{Body: []byte("items:" + strconv.Itoa(size)), Items: size})
	}
	return p
}

func (w monthsWork) Shrink(_ context.Context, _ job.Job, _ Payload, items int) (Payload, error) {
	if items < 1 {
		return Payload{}, &TooBigError{Items: 1}
	}
	return w.render(min(items, w.total)), nil
}

func (monthsWork) Done(context.Context, job.Job, Payload) (*job.Job, error) { return nil, nil }
func (monthsWork) Hold(context.Context, job.Job, time.Time) error           { return nil }

// On an endpoint metered by items, every message of a push pays for the
// items it carries, the vendor counting every one: a slot paying for the
// first message only, and later messages booking at most the burst's
// tokens (attemptTokens' cap), would overspend. Pushes of 70 items in
// messages of 10, 30 and 30 on a burst of 20 at 40/s, through the real
// push client (each later message books its own tokens) and a vendor that
// counts the items in each body it receives: its window never holds more
// than burst + rate·W items.
func TestEveryMessageOfAnItemsPushPaysForItsItems(t *testing.T) {
	c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
	var at []time.Time
	var sizes []int
	vendor := otapushtest.NewVendor(t, countingItems(func(n int) otapushtest.Answer {
		for range n {
			at = append(at, c.Now())
		}
		sizes = append(sizes, n)
		return otapushtest.Answer{}
	}))
	lim := limitertest.New(limitertest.WithClock(c.Now), limitertest.WithSleep(c.Sleep))
	client := otapushtest.NewClient(t, lim, c.Now, c.Sleep)
	route := itemsRoute
	route.URL, route.LocalShare = vendor.URL, false
	d := &worker{&Dispatcher{Limiter: lim, Pusher: client, Queue: &fakeQueue{}, Policy: DefaultPolicy,
		Now: c.Now, Sleep: c.Sleep}, monthsWork{first: 10, month: 30, total: 70}, fixedRoute(route)}
	start := c.Now()
	for c.Now().Sub(start) < 10*time.Second {
		j := job.Job{ID: "lane@t", Channel: "bk", Credential: "c", Endpoint: "rates", FirstSeen: c.Now(), Items: 70}
		res, err := d.HandleJob(t.Context(), j)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != Pushed {
			t.Fatalf("job %s at %v: %s (%s), want pushed", j.ID, c.Now().Sub(start), res.Outcome, res.Reason)
		}
	}
	limit := window.Limit{Rate: 40, Burst: 20}
	vendor.Sync(func() {}) // the answers' records are the test's to read after it
	if len(at) < 300 {
		t.Fatalf("the vendor counted %d items in 10 s, want near the 400 + 20 the limit allows", len(at))
	}
	if err := window.Check(at, limit); err != nil {
		t.Fatalf("the vendor's item counter: %v (message sizes %v)", err, sizes)
	}
	w, _ := window.Fullest(at, limit)
	t.Logf("%d items in %d messages over 10 s; fullest window %v", len(at), len(sizes), w)
}

// countingItems is a vendor's answer that reads the item count of each
// body ("items:n", as the tests' payloads carry it) and answers as judge
// does; a body without a count is answered 400.
func countingItems(judge func(n int) otapushtest.Answer) func(otapushtest.Request) otapushtest.Answer {
	return func(r otapushtest.Request) otapushtest.Answer {
		n, err := strconv.Atoi(strings.TrimPrefix(r.Body, "items:"))
		if err != nil {
			return otapushtest.Answer{Status: http.StatusBadRequest, Body: "bad body"}
		}
		return judge(n)
	}
}
