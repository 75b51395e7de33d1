package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// The syncer resolves each job once into a dispatch.Task: the job, its
// route, and its lane's work (laneWork), bound to the invocation the job
// came in. The dispatcher calls nothing of the Syncer: what it needs of
// the lane (begin, done, hold, abandon, and shrink and take apart a push)
// it asks of the task's work, which is this job's alone.

// laneWork is one lane job's work: the lane its payload names, read once
// (laneOf) and kept up to date as the job moves on to other owner tokens
// (rebased, Done's next), and the invocation it came in (nil outside a
// change batch).
type laneWork struct {
	s   *Syncer
	inv *invocation

	// payload is the job payload id, ref and done (or err) were read from.
	payload []byte
	id      lane.ID
	ref     laneRef
	done    []lane.Element
	err     error

	// enc is the encoding the job's route resolved, for its push.
	enc *encoding
	// last: the job came for its queue's last receive and gives up its
	// lane before it works (receives.go).
	last bool
}

// resolve is j's task: its route, computed once, and its lane's work.
func (s *Syncer) resolve(inv *invocation, j job.Job) dispatch.Task {
	w := &laneWork{s: s, inv: inv}
	w.lane(j)
	return s.taskOf(w, j)
}

// taskOf is j's task, whose lane w has read.
func (s *Syncer) taskOf(w *laneWork, j job.Job) dispatch.Task {
	t := dispatch.Task{Job: j, Work: w, Shrink: s.Shrink, Isolate: s.Refused,
		Recheck: w.err == nil && w.ref.SeenOwner != "",
		Refresh: func() bool { return s.RefreshCredential(j) }}
	if w.err == nil {
		t.Route, w.enc, t.Err = s.route(j, w.ref.PropertyID)
		if w.ref.Bulk {
			t.Route, t.AtSlot = bulkRoute(t.Route), true
		}
	} else {
		t.Route, t.Err = s.Route(j)
	}
	return t
}

// deferredTasks are what j, back from the deferred queue, dispatches: its
// own task, or, for a refused change redriven from the dead-letter queue,
// the push its lane's mark schedules (remark). A lane job received for
// its queue's last time, a recheck job too (its earlier receives may have
// taken the lane over and died), is dead-lettered with last, the reason,
// before it works, and its lane handed to the sweep (receives.go).
func (s *Syncer) deferredTasks(ctx context.Context, inv *invocation, j job.Job, last string) ([]dispatch.Task, error) {
	w := &laneWork{s: s, inv: inv}
	id, ref, _, err := w.lane(j)
	if err == nil && len(ref.Refused) > 0 {
		return s.remark(ctx, inv, j, id, ref)
	}
	t := s.taskOf(w, j)
	if err == nil && last != "" {
		t.GiveUp, w.last = last, true
	}
	return []dispatch.Task{t}, nil
}

// Task is j resolved as the syncer hands it to its dispatcher outside a
// change batch (a deferred job's): its route and its lane's work.
func (s *Syncer) Task(j job.Job) dispatch.Task { return s.resolve(nil, j) }

// laneTask is the task of j, which the syncer made for lane id under ref
// (laneJob): its payload is not read back.
func (s *Syncer) laneTask(inv *invocation, j job.Job, id lane.ID, ref laneRef) dispatch.Task {
	w := &laneWork{s: s, inv: inv}
	w.made(j, id, ref, nil)
	return s.taskOf(w, j)
}

// lane is the lane j names: read from its payload unless it is the one w
// read or made last.
func (w *laneWork) lane(j job.Job) (lane.ID, laneRef, []lane.Element, error) {
	if w.payload == nil || !bytes.Equal(j.Payload, w.payload) {
		w.payload = j.Payload
		w.id, w.ref, w.done, w.err = laneOf(j)
	}
	return w.id, w.ref, w.done, w.err
}

func laneOf(j job.Job) (lane.ID, laneRef, []lane.Element, error) {
	var ref laneRef
	if err := json.Unmarshal(j.Payload, &ref); err != nil || ref.PropertyID == "" || ref.Token == "" {
		return lane.ID{}, laneRef{}, nil, fmt.Errorf("%w: job %q is not a lane job (payload %s)", job.ErrMalformed, j.ID, j.Payload)
	}
	for _, p := range ref.parts() {
		if _, err := lane.ParseElement(p.Element); err != nil {
			return lane.ID{}, laneRef{}, nil, fmt.Errorf("%w: job %q: part: %v", job.ErrMalformed, j.ID, err)
		}
		if _, err := time.Parse(ari.DateLayout, p.From); err != nil {
			return lane.ID{}, laneRef{}, nil, fmt.Errorf("%w: job %q: part from %q: %v", job.ErrMalformed, j.ID, p.From, err)
		}
	}
	done := make([]lane.Element, len(ref.Pushed))
	for i, s := range ref.Pushed {
		e, err := lane.ParseElement(s)
		if err != nil {
			return lane.ID{}, laneRef{}, nil, fmt.Errorf("%w: job %q: %v", job.ErrMalformed, j.ID, err)
		}
		done[i] = e
	}
	return lane.ID{Property: ref.PropertyID, Kind: j.Endpoint, Channel: j.Channel, Credential: j.Credential, HotelRef: ref.HotelRef}, ref, done, nil
}

// made records the payload of j, which the syncer made for lane id under
// ref (done: ref.Pushed, parsed), so that w need not read it back.
func (w *laneWork) made(j job.Job, id lane.ID, ref laneRef, done []lane.Element) job.Job {
	ref.PropertyID, ref.HotelRef = id.Property, id.HotelRef
	w.payload, w.id, w.ref, w.done, w.err = j.Payload, id, ref, done, nil
	return j
}

var _ dispatch.Work = (*laneWork)(nil)
