package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// scriptedPusher answers each message by its body: an error from errs, or
// accepted.
type scriptedPusher struct {
	errs map[string]error
	reqs []otapush.Request
}

func (p *scriptedPusher) Push(_ context.Context, req otapush.Request) (otapush.Response, error) {
	p.reqs = append(p.reqs, req)
	return otapush.Response{Attempts: 1, Warnings: []string{}}, p.errs[string(req.Body)]
}

// messageWork is Work whose push is the messages it was given, and an
// Isolate that splits a refused message of changes "a,b" into one per
// change until one is alone, which it dead-letters.
type messageWork struct {
	work
	msgs    []Message
	settled Payload
}

func (w *messageWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	return j, Payload{Messages: append([]Message(nil), w.msgs...), Items: len(w.msgs)}, nil
}

func (w *messageWork) Done(_ context.Context, _ job.Job, p Payload) (*job.Job, error) {
	w.settled = p
	return nil, nil
}

func (w *messageWork) Refused(_ context.Context, _ job.Job, p *Payload, i int, perm *otapush.PermanentError) ([]Message, []Letter, error) {
	changes, _ := p.Messages[i].State.([]string)
	if len(changes) == 1 {
		return nil, []Letter{{Body: changes[0], Reason: perm.Summary}}, nil
	}
	var parts []Message
	for _, c := range changes {
		parts = append(parts, Message{Body: []byte(c), Items: 1, State: []string{c}})
	}
	return parts, nil, nil
}

func TestPushOfSeveralMessages(t *testing.T) {
	refused := &otapush.PermanentError{Status: 200, Summary: "392: Room ID is not valid"}
	tests := []struct {
		name string
		msgs []Message
		errs map[string]error
		// want: requests sent, accepted messages (by body), refused
		// changes dead-lettered, isolation parts, outcome.
		requests   int
		accepted   []string
		dead       []string
		isolation  int
		outcome    Outcome
		credential bool
		hotel      bool
	}{
		{"two months, both accepted", []Message{{Body: []byte("dec"), Items: 3}, {Body: []byte("jan"), Items: 2}}, nil,
			2, []string{"dec", "jan"}, nil, 0, Pushed, false, false},
		{"a later message fails: the first is settled", []Message{{Body: []byte("dec")}, {Body: []byte("jan")}},
			map[string]error{"jan": &otapush.DeferError{Cause: fmt.Errorf("503")}}, 2, []string{"dec"}, nil, 0, Pushed, false, false},
		{"a refused merged message is isolated", []Message{{Body: []byte("a,b"), State: []string{"a", "b"}}},
			map[string]error{"a,b": refused, "b": refused}, 3, []string{"a"}, []string{"b"}, 2, Pushed, false, false},
		{"the first refused for its credential is not isolated", []Message{{Body: []byte("a,b"), State: []string{"a", "b"}}, {Body: []byte("c")}},
			map[string]error{"a,b": &otapush.PermanentError{Status: 401, Summary: "credential refused"}}, 1, nil, nil, 0, Deferred, true, false},
		{"a credential refused inside a 200 is not isolated", []Message{{Body: []byte("a,b"), State: []string{"a", "b"}}},
			map[string]error{"a,b": &otapush.PermanentError{Status: 200, Summary: "1001: invalid username or password", Scope: otapush.ScopeCredential}}, 1, nil, nil, 0, Deferred, true, false},
		{"a hotel refusal is not isolated", []Message{{Body: []byte("a,b"), State: []string{"a", "b"}}, {Body: []byte("c")}},
			map[string]error{"a,b": &otapush.PermanentError{Status: 403, Summary: "no access to hotel", Scope: otapush.ScopeHotel}}, 1, nil, nil, 0, Deferred, false, true},
		{"a hotel refusal met by an isolation part, nothing settled yet, is not isolated further", []Message{{Body: []byte("a,b"), State: []string{"a", "b"}}},
			map[string]error{"a,b": refused, "a": &otapush.PermanentError{Status: 200, Summary: "375: Hotel not active", Scope: otapush.ScopeHotel}}, 2, nil, nil, 2, Deferred, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			w := &messageWork{work: work{clock: r.clock}, msgs: tt.msgs}
			p := &scriptedPusher{errs: tt.errs}
			r.d.Work, r.d.Pusher = w, p
			r.d.Can.Penalize = r.lim.Penalize
			res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.reqs) != tt.requests || res.Outcome != tt.outcome || res.CredentialRefused != tt.credential || res.HotelRefused != tt.hotel || res.Isolation != tt.isolation {
				t.Fatalf("%d requests, %+v; want %d requests, %s, isolation %d, credential refused %v, hotel refused %v", len(p.reqs), res, tt.requests, tt.outcome, tt.isolation, tt.credential, tt.hotel)
			}
			for i, q := range p.reqs {
				// The first message goes on the job's slot; each later
				// one books its own token, under its own idempotency key.
				if q.Reserved != (i == 0) || (i > 0 && q.JobID == p.reqs[0].JobID) {
					t.Errorf("request %d: reserved %v, job id %q; want only the first on the slot, each its own id", i, q.Reserved, q.JobID)
				}
			}
			var accepted []string
			for _, m := range w.settled.Messages {
				if m.Accepted {
					accepted = append(accepted, string(m.Body))
				}
			}
			if fmt.Sprint(accepted) != fmt.Sprint(tt.accepted) || fmt.Sprint(r.queue.dead) != fmt.Sprint(reasons(tt.dead, refused.Summary)) {
				t.Errorf("accepted %v, dead letters %v; want %v and %v", accepted, r.queue.dead, tt.accepted, tt.dead)
			}
		})
	}
}

// On an endpoint metered by items, the tokens the slot holds beyond the
// first message's pay for the next messages; only what they do not cover
// books its own.
func TestSlotTokensPayForTheNextMessages(t *testing.T) {
	r := newRig(t)
	w := &messageWork{work: work{clock: r.clock}, msgs: []Message{{Body: []byte("dec"), Items: 3}, {Body: []byte("jan"), Items: 2}, {Body: []byte("feb"), Items: 2}}}
	p := &scriptedPusher{}
	r.d.Work, r.d.Pusher, r.d.Routes = w, p, kItemsRoute
	j := testJob(r.clock.Now())
	j.Hold.At, j.Hold.Tokens = r.clock.Now(), 5
	if _, err := r.d.HandleJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range p.reqs {
		got = append(got, fmt.Sprintf("%s:%d:%v", q.Body, q.Tokens, q.Reserved))
	}
	if want := "[dec:3:true jan:2:true feb:2:false]"; fmt.Sprint(got) != want {
		t.Fatalf("requests %v, want %s (5 tokens on the slot pay for dec and jan)", got, want)
	}
}

// kItemsRoute routes every job to one bucket of 4/s, burst 8, metered by
// items.
var kItemsRoute = fixedRoute{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(4, 8)}, URL: "http://ota.invalid", ItemWeight: 1}

func reasons(dead []string, reason string) []string {
	var out []string
	for range dead {
		out = append(out, reason)
	}
	return out
}

// A refused message taken apart whose first part cannot go now (its token
// beyond the call's hold) leaves nothing accepted, but the push learned
// the parts: the work settles it (Done, whose next push sends them
// apart), rather than the push failing and its next attempt sending the
// refused message whole, to be refused and split again.
func TestTakenApartButNoPartSentIsNotAFailedPush(t *testing.T) {
	r := newRig(t)
	w := &messageWork{work: work{clock: r.clock}, msgs: []Message{{Body: []byte("a,b"), State: []string{"a", "b"}}}}
	p := &scriptedPusher{errs: map[string]error{
		"a,b": &otapush.PermanentError{Status: 200, Summary: "392: Room ID is not valid"},
		"a":   &otapush.DeferError{Cause: fmt.Errorf("no token within the push's budget")},
	}}
	r.d.Work, r.d.Pusher = w, p
	r.d.Can.Penalize = r.lim.Penalize
	res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.reqs) != 2 || res.Outcome != Pushed || res.Isolation != 2 || len(w.settled.Messages) != 3 {
		t.Fatalf("%d requests, %+v, the work settled %d messages; want 2 requests, pushed, isolation 2, and the refused message and its 2 parts settled by the work",
			len(p.reqs), res, len(w.settled.Messages))
	}
	if m := w.settled.Messages; m[0].Accepted || m[1].Accepted || m[2].Accepted || len(r.queue.dead) != 0 {
		t.Fatalf("accepted %v %v %v, dead letters %v; want nothing accepted nor dead-lettered", m[0].Accepted, m[1].Accepted, m[2].Accepted, r.queue.dead)
	}
}

// slowVendor answers each message after took, as scriptedPusher does,
// unless the request's context ends first.
type slowVendor struct {
	scriptedPusher
	took time.Duration
}

func (p *slowVendor) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	select {
	case <-ctx.Done():
		p.reqs = append(p.reqs, req)
		return otapush.Response{}, ctx.Err()
	case <-time.After(p.took):
	}
	return p.scriptedPusher.Push(ctx, req)
}

// storeWork is messageWork whose Done writes to a store, as a lane's
// finish does: it fails once the call's context has ended.
type storeWork struct {
	messageWork
	doneAt time.Time
}

func (w *storeWork) Done(ctx context.Context, j job.Job, p Payload) (*job.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.doneAt = time.Now()
	return w.messageWork.Done(ctx, j, p)
}

// A push's later messages stop DeadlineMargin before the invocation's
// deadline, so that the push settles what it sent while the call can
// still write. A refused message of eight changes, with 45 s of the
// invocation left: on a vendor answering in 10 s, the refused message and
// three of its parts are answered by 40 s; the fourth part, unanswered
// when the margin begins at 42 s, is given up, and the push is settled
// then, its parts carried by the lane's next push. Sent on into the
// deadline, the push settled nothing (adversary seed 214: each redelivery
// began the same isolation whole and was cut at the same depth).
func TestLaterMessagesEndBeforeTheDeadlineMargin(t *testing.T) {
	tests := []struct {
		took     time.Duration
		accepted string
		requests int
	}{
		{10 * time.Second, "[a b c]", 5},
		{5 * time.Second, "[a b c d e f g]", 9},
		{4 * time.Second, "[a b c d e f g h]", 9}, // done at 36 s: nothing cut
	}
	for _, tt := range tests {
		t.Run(tt.took.String(), synctestRun(func(t *testing.T) {
			r := rigOn(t, bubbleClock{})
			changes := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
			w := &storeWork{messageWork: messageWork{work: work{clock: r.clock}, msgs: []Message{{Body: []byte("a,b,c,d,e,f,g,h"), State: changes}}}}
			p := &slowVendor{scriptedPusher: scriptedPusher{errs: map[string]error{
				"a,b,c,d,e,f,g,h": &otapush.PermanentError{Status: 200, Summary: "392: Room ID is not valid"},
			}}, took: tt.took}
			r.d.Work, r.d.Pusher = w, p
			r.d.Can.Penalize = r.lim.Penalize
			start := time.Now()
			ctx, cancel := context.WithDeadline(context.Background(), start.Add(45*time.Second))
			defer cancel()
			res, err := r.d.HandleJob(ctx, testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			var accepted []string
			for _, m := range w.settled.Messages {
				if m.Accepted {
					accepted = append(accepted, string(m.Body))
				}
			}
			margin := start.Add(45*time.Second - r.d.Policy.DeadlineMargin)
			if w.doneAt.IsZero() || w.doneAt.After(margin) || res.Outcome != Pushed || fmt.Sprint(accepted) != tt.accepted || len(p.reqs) != tt.requests {
				t.Fatalf("settled at %v (zero: never), %+v, accepted %v after %d requests; want settled by %v (the margin's start), pushed, %s accepted after %d requests",
					w.doneAt.Sub(start), res, accepted, len(p.reqs), margin.Sub(start), tt.accepted, tt.requests)
			}
		}))
	}
}
