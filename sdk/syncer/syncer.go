// Package syncer is what the sync function does with each message: a PMS
// change is written into ARI state and fanned out into one push job per
// connected channel endpoint; a job is handed to the dispatcher, which
// pushes, defers or sheds it. Pushes are state-backed: the job is only a
// trigger, and the body is the state of its range read at push time.
package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/ari"
	"github.com/fleetbucket/fleetbucket/sdk/connections"
	"github.com/fleetbucket/fleetbucket/sdk/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/job"
)

// Syncer handles both of the sync function's queues.
type Syncer struct {
	Config     *connections.Config
	State      *ari.Store
	Dispatcher *dispatch.Dispatcher
	// Token returns a credential's API token from its token_env; default
	// os.Getenv. Tokens go into request headers only, never into logs or
	// messages.
	Token func(env string) string
	Now   func() time.Time
}

// Trigger is a state-backed job's payload: which state to push, and where.
type Trigger struct {
	PropertyID string `json:"property_id"`
	HotelRef   string `json:"hotel_ref"`
	Kind       string `json:"kind"`
	RoomType   string `json:"room_type"`
	RatePlan   string `json:"rate_plan,omitempty"`
	From       string `json:"from"`
	To         string `json:"to"`
	Sequence   int64  `json:"sequence"`
}

// Push is the body sent to an OTA: the current state of a range.
type Push struct {
	HotelRef string    `json:"hotel_ref"`
	Kind     string    `json:"kind"`
	RoomType string    `json:"room_type"`
	RatePlan string    `json:"rate_plan,omitempty"`
	Days     []ari.Day `json:"days"`
}

// ChangeReport is what became of one change event.
type ChangeReport struct {
	EventID    string
	Applied    int // dates whose state changed
	Results    []dispatch.Result
	Invalid    string // set when the event was dead-lettered
	Unroutable bool
}

// HandleChange processes one changes-queue message. Malformed events and
// events for unknown properties are dead-lettered with the reason. A
// non-nil error means the message must stay on its queue; processing it
// again is safe (state writes are sequence-guarded, pushes send state).
func (s *Syncer) HandleChange(ctx context.Context, body string) (ChangeReport, error) {
	out := s.HandleBatch(ctx, []Message{{ID: "1", Body: body}})[0]
	return out.Change, out.Err
}

// Message is one SQS record of a batch.
type Message struct {
	ID, Body string
	// Deferred says it came from the deferred queue (a push job) rather
	// than the changes queue (a PMS change event).
	Deferred bool
}

// MessageResult is what became of one message. Err non-nil means it must
// stay on its queue (a batch item failure).
type MessageResult struct {
	ID     string
	Err    error
	Change ChangeReport      // for a change event
	Jobs   []dispatch.Result // every job the message produced or carried
}

// HandleBatch processes a Lambda batch from either queue. Changes are
// applied to state and fanned out, deferred jobs decoded; then all the
// jobs are dispatched together, so the jobs of one bucket are booked with
// one write (dispatch.HandleJobs).
func (s *Syncer) HandleBatch(ctx context.Context, msgs []Message) []MessageResult {
	out := make([]MessageResult, len(msgs))
	jobsOf := make([][]job.Job, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		out[i].ID = m.ID
		wg.Go(func() { jobsOf[i], out[i].Change, out[i].Err = s.prepare(ctx, m) })
	}
	wg.Wait()
	var all []job.Job
	var owner []int
	for i, js := range jobsOf {
		for _, j := range js {
			all, owner = append(all, j), append(owner, i)
		}
	}
	results, errs := s.Dispatcher.HandleJobs(ctx, all)
	for n, res := range results {
		i := owner[n]
		if errs[n] != nil {
			out[i].Err = errors.Join(out[i].Err, errs[n])
			continue
		}
		out[i].Jobs = append(out[i].Jobs, res)
		if !msgs[i].Deferred {
			out[i].Change.Results = append(out[i].Change.Results, res)
		}
	}
	return out
}

// prepare turns a message into the jobs to dispatch, dead-lettering what
// can never be processed.
func (s *Syncer) prepare(ctx context.Context, m Message) ([]job.Job, ChangeReport, error) {
	if m.Deferred {
		j, err := job.Decode(m.Body)
		if err != nil {
			rep, err := s.reject(ctx, "", m.Body, err.Error())
			return nil, rep, err
		}
		return []job.Job{j}, ChangeReport{}, nil
	}
	c, err := ari.Parse(m.Body, s.Config.MaxRangeDays)
	if err != nil {
		rep, err := s.reject(ctx, "", m.Body, err.Error())
		return nil, rep, err
	}
	targets, ok := s.Config.Targets(c.PropertyID, c.Kind)
	if !ok {
		rep, err := s.reject(ctx, c.EventID, m.Body, fmt.Sprintf("unknown property %q: not in the connections config", c.PropertyID))
		return nil, rep, err
	}
	applied, err := s.State.Apply(ctx, c)
	if err != nil {
		return nil, ChangeReport{}, err
	}
	jobs := make([]job.Job, len(targets))
	for i, t := range targets {
		jobs[i] = s.job(c, t)
	}
	return jobs, ChangeReport{EventID: c.EventID, Applied: applied}, nil
}

func (s *Syncer) reject(ctx context.Context, id, body, reason string) (ChangeReport, error) {
	if err := s.Dispatcher.Queue.DeadLetter(ctx, body, reason); err != nil {
		return ChangeReport{}, err
	}
	return ChangeReport{EventID: id, Invalid: reason}, nil
}

func (s *Syncer) job(c ari.Change, t connections.Target) job.Job {
	payload, _ := json.Marshal(Trigger{PropertyID: c.PropertyID, HotelRef: t.HotelRef, Kind: c.Kind,
		RoomType: c.RoomType, RatePlan: c.RatePlan, From: c.From, To: c.To, Sequence: c.Sequence})
	return job.Job{
		ID:      c.EventID + "#" + t.Channel + "#" + t.Credential + "#" + t.Endpoint,
		Channel: t.Channel, Credential: t.Credential, Endpoint: t.Endpoint,
		Payload: payload, FirstSeen: s.now(),
	}
}

// HandleDeferred processes one deferred-queue message.
func (s *Syncer) HandleDeferred(ctx context.Context, body string) (dispatch.Result, error) {
	return s.Dispatcher.Handle(ctx, body)
}

// Route resolves a job against the connections config; it is the
// dispatcher's Router.
func (s *Syncer) Route(j job.Job) (dispatch.Route, error) {
	url, _, err := s.Config.Endpoint(j.Channel, j.Endpoint)
	if err != nil {
		return dispatch.Route{}, err
	}
	limits, err := s.Config.Limits(j.Channel, j.Endpoint)
	if err != nil {
		return dispatch.Route{}, err
	}
	if limits.Shards > 1 {
		return dispatch.Route{}, fmt.Errorf("channel %q endpoint %q is sharded, which the sync function does not support yet", j.Channel, j.Endpoint)
	}
	var t Trigger
	if limits.PropertyShare != nil {
		if err := json.Unmarshal(j.Payload, &t); err != nil || t.PropertyID == "" {
			return dispatch.Route{}, fmt.Errorf("job %q names no property, and endpoint %q has a per-property share", j.ID, j.Endpoint)
		}
	}
	buckets := limits.Buckets(j.BucketKey(), t.PropertyID)
	cred, ok := s.Config.Channels[j.Channel].Credentials[j.Credential]
	if !ok {
		return dispatch.Route{}, fmt.Errorf("channel %q has no credential %q", j.Channel, j.Credential)
	}
	token := s.token(cred.TokenEnv)
	if token == "" {
		return dispatch.Route{}, fmt.Errorf("credential %q: %s is not set", j.Credential, cred.TokenEnv)
	}
	return dispatch.Route{
		Bucket: buckets[0],
		Also:   buckets[1:],
		URL:    url,
		Header: http.Header{"Authorization": {"Bearer " + token}},
	}, nil
}

// Render reads the state a job pushes; it is the dispatcher's Render.
func (s *Syncer) Render(ctx context.Context, j job.Job) ([]byte, error) {
	var t Trigger
	if err := json.Unmarshal(j.Payload, &t); err != nil {
		return nil, fmt.Errorf("job %q has no trigger payload: %w", j.ID, err)
	}
	cell := ari.Change{PropertyID: t.PropertyID, Kind: t.Kind, RoomType: t.RoomType, RatePlan: t.RatePlan}.Cell()
	days, err := s.State.Read(ctx, cell, t.From, t.To)
	if err != nil {
		return nil, err
	}
	if superseded(days, t.Sequence) {
		return nil, dispatch.ErrSuperseded
	}
	return json.Marshal(Push{HotelRef: t.HotelRef, Kind: t.Kind, RoomType: t.RoomType, RatePlan: t.RatePlan, Days: days})
}

// superseded reports whether every day of a range holds a change newer than
// seq. Each day's value is then pushed by the job of the change that wrote
// it, at or after that write, so a job for seq has nothing left to send.
func superseded(days []ari.Day, seq int64) bool {
	for _, d := range days {
		if d.Sequence <= seq {
			return false
		}
	}
	return true
}

func (s *Syncer) token(env string) string {
	if s.Token != nil {
		return s.Token(env)
	}
	return os.Getenv(env)
}

func (s *Syncer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
