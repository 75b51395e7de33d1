package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Hold is a job's hold on a slot of the fleet bucket: a job run within
// At + grace pushes without a second acquire.
type Hold struct {
	// At is the start of the token the job reserved.
	At time.Time
	// Key is the bucket the slot was booked in when it is not the route's
	// own: one shard of a sharded bucket.
	Key string
	// Tokens is how many tokens the slot holds, on an endpoint metered by
	// items; 0 means one.
	Tokens int
	// Grant is the stamp of a slot an adaptive bucket granted ahead
	// (limiter.Stamp): the slot is confirmed before it is spent, since a
	// throttle may have revoked it, and a throttle on its push is known to
	// come from a slot granted at that version. Zero for any other slot.
	Grant Grant
	// Quota says the slot's token was taken with its unit of the route's
	// calendar quota (in one transaction). A slot booked any other way
	// has none, and its request takes the unit as it leaves. Not carried
	// on the wire: a job deferred holding such a slot takes a second unit
	// when it comes back (quota wasted, never overspent).
	Quota bool
	// Ahead says the slot was granted far enough ahead of its spending
	// (limiter.SilenceAfter) for a 429 to land in between: it is checked
	// for a silence the vendor asked since (limiter.Silence) before it is
	// spent. Not carried on the wire: every slot a message carries was
	// booked a queue's trip before it comes, so a decoded hold is ahead.
	Ahead bool
}

// Grant is the adaptive state a slot was granted at: limiter.Stamp's
// fields, kept here so that a job needs nothing of the limiter to travel.
type Grant struct {
	Version  int64
	Interval int64 // µs; zero: no stamp
}

// Held reports whether h holds a slot.
func (h Hold) Held() bool { return !h.At.IsZero() }

// Version is the wire format's version; Decode refuses others, so a
// deployment never misreads a message written by a newer one. A new field
// that an older worker may pass over needs no new version (Decode).
const Version = 1

// MaxFenceTags bounds Job.FenceTags. Only a fence write sent and never
// answered adds one (with the limiter's breaker open nothing is sent), so
// a job gathers few; the bound keeps a long, flapping outage from growing
// its body and its fence write's condition without end.
const MaxFenceTags = 8

// WithFenceTag is j with tag added to its FenceTags, the oldest dropped
// past MaxFenceTags.
func (j Job) WithFenceTag(tag string) Job {
	tags := append(append([]string(nil), j.FenceTags...), tag)
	if len(tags) > MaxFenceTags {
		tags = tags[len(tags)-MaxFenceTags:]
	}
	j.FenceTags = tags
	return j
}

// Job is one push to one channel endpoint: of a lane's pending changes,
// read from state at push time (sdk/pipeline/syncer's work), or of a
// payload the job carries itself.
type Job struct {
	V int `json:"v"`
	// ID is stable across redeliveries, and names the push: the vendor's
	// idempotency key (X-Job-Id). A lane's job is named after the lane and
	// its owner token, e.g.
	// "hotel-aurora#availability#booking_com#cred-1#BK-1@<token>". Duplicates are
	// told apart by Identity, which adds what else the push carries: jobs
	// that share an ID but not a credential, endpoint or payload are two
	// pushes.
	ID         string `json:"id"`
	Channel    string `json:"channel"`    // e.g. "booking_com"
	Credential string `json:"credential"` // the credential's id, never its secret
	Endpoint   string `json:"endpoint"`   // e.g. "availability"
	// Payload is what the push sends (or, for state-backed pushes, what
	// range of state to read at push time).
	Payload json.RawMessage `json:"payload,omitempty"`

	FirstSeen time.Time `json:"first_seen"`
	// Deadline, if set, is when pushing this job stops being useful; past
	// it the job is shed to the dead-letter queue without spending a token.
	Deadline time.Time `json:"deadline,omitzero"`
	// Hold is the slot this job reserved in the fleet bucket; zero if it
	// holds none. It is replaced or cleared as a whole, never field by
	// field: a slot's key, tokens and stamp mean nothing without it.
	Hold Hold `json:"-"` // written flat, under its fields' own names (wire.go)
	// Items is how many items the job expects its push to carry, on an
	// endpoint metered by items: its slot books their tokens.
	Items int `json:"items,omitempty"`
	// Fit is the most items one request of the job may carry, on an
	// endpoint metered by items, since the vendor throttled a larger one
	// to the end of a push (half of its items, halved again by each such
	// throttle, unless the vendor took as large a request of the bucket
	// within the last minute: dispatch's took.go); 0 bounds nothing below
	// the bucket's burst. The lane's next jobs carry it on.
	Fit int `json:"fit,omitempty"`
	// NotBefore, if set, is when the job is due: the end of its lane's
	// linger (Linger), the time a recheck waits for, or the end of a wait
	// longer than SQS allows (queue.Defer serves it in legs). Handed out
	// earlier, the job sleeps or is deferred again for the remainder.
	NotBefore time.Time `json:"not_before,omitzero"`
	// Linger says NotBefore is work collecting before its push (a lane's
	// linger), not a bound: the push may go earlier, when its bucket
	// would otherwise fill up meanwhile and lose the tokens it accrues.
	Linger bool `json:"linger,omitempty"`
	// Deferrals counts trips through the deferred queue.
	Deferrals int `json:"deferrals"`
	// Failures counts the pushes of this job in a row that failed
	// transiently (5xx, network, no answer in time): each trip
	// backs off longer, and past the dispatcher's MaxFailures the job is
	// dead-lettered rather than retried forever. A push throttled to its
	// end is not counted: pacing is the limiter's (it backs off as far as
	// the failures so far, within its max age).
	Failures int `json:"failures,omitempty"`
	// Tries counts the pushes of this job that began (the dispatcher's
	// fence let them through): copies of one delivery share it, so only
	// one of them pushes, and a retry after a failed push asks under the
	// next number. It survives Restarted, so a redriven job is not
	// fenced out by its own last push.
	Tries int `json:"tries,omitempty"`
	// FenceTags are the tags of this try's fence writes that the store did
	// not answer (limiter.FirstAfter): any of them may have landed, and the
	// job, back from its deferral, takes over a fence they hold instead of
	// taking it for another delivery's. At most MaxFenceTags, the newest.
	FenceTags []string `json:"fence_tags,omitempty"`
	// LeaseBusy says the job's last push found every in-flight lease of
	// its route held and was deferred for one: back, it takes its lease
	// before its token, whatever its process knows of the lease set, so
	// that no token goes stale in another wait for a lease.
	LeaseBusy bool `json:"lease_busy,omitempty"`
	// AskAt is the job's turn to ask its bucket, on a route that takes
	// only tokens free at once (dispatch's Route.OneAsker: a resync's bulk
	// pushes): the slot it booked in the bucket's ask queue. Zero: it has
	// none booked, or asked at it.
	AskAt time.Time `json:"ask_at,omitzero"`
	// DeferredAt and Due are when the job was last deferred and when the
	// queue should hand it back (DeferredAt plus its whole-second delay):
	// the delivery's lateness is the arrival minus Due.
	DeferredAt time.Time `json:"deferred_at,omitzero"`
	Due        time.Time `json:"due,omitzero"`
}

// Identity names the push a job makes, whatever copy of it a queue
// delivers: its ID and a digest of its channel, credential, endpoint and
// payload. Copies of one job (a redelivery, a send retried after its answer
// was lost, a deferral) share it; jobs that merely share an ID do not. The
// payload is digested in the form Encode writes it (compact, HTML-escaped),
// so a hand-written body and its re-encoded copy agree.
func (j Job) Identity() string {
	h := sha256.New()
	for _, part := range []string{j.Channel, j.Credential, j.Endpoint} {
		h.Write([]byte(part))
		h.Write([]byte{0}) // '#' is refused in these fields, NUL is not: length-safe either way
	}
	var compact, escaped bytes.Buffer
	if json.Compact(&compact, j.Payload) == nil {
		json.HTMLEscape(&escaped, compact.Bytes())
		h.Write(escaped.Bytes())
	} else {
		h.Write(j.Payload) // invalid JSON: Validate refuses it before any push
	}
	return j.ID + "#" + hex.EncodeToString(h.Sum(nil)[:12])
}

// Restarted is j as if first seen at now, for a job moved back from the
// dead-letter queue after a fix: its lifetime (first seen, deferrals,
// failures) starts over, or a job dead-lettered as expired would expire
// again on arrival; and the slot and times of its last trip, long past,
// are dropped. Its id, payload and deadline stay.
func (j Job) Restarted(now time.Time) Job {
	j.FirstSeen, j.Deferrals, j.Failures = now, 0, 0
	j.Hold, j.NotBefore, j.AskAt, j.DeferredAt, j.Due = Hold{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return j
}

// Validate reports the first missing or inconsistent field.
func (j Job) Validate() error {
	var problems []string
	for _, f := range []struct{ name, v string }{{"id", j.ID}, {"channel", j.Channel}, {"credential", j.Credential}, {"endpoint", j.Endpoint}} {
		if strings.TrimSpace(f.v) == "" {
			problems = append(problems, f.name+" is empty")
		} else if strings.Contains(f.v, "#") && f.name != "id" {
			problems = append(problems, f.name+" contains '#', the bucket key separator")
		}
	}
	if j.FirstSeen.IsZero() {
		problems = append(problems, "first_seen is missing")
	}
	if len(j.Payload) > 0 && !json.Valid(j.Payload) {
		problems = append(problems, "payload is not valid JSON")
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid job %q: %s", j.ID, strings.Join(problems, "; "))
	}
	return nil
}

// ErrMalformed is matched by every error Decode returns: the message can
// never be processed and belongs in the dead-letter queue.
var ErrMalformed = errors.New("malformed job message")

// Encode returns the message body for j.
func Encode(j Job) (string, error) {
	j.V = Version
	if err := j.Validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(j)
	return string(b), err
}

// Decode parses and validates a message body. It reads the fields it
// knows and passes over any other: in a rolling deploy, and in a rollback,
// a worker of one release reads the messages a worker of the other wrote,
// and a field added since (LeaseBusy was one) is an optional hint that a
// worker without it may do without. A field no worker may ignore comes
// with a new Version, which Decode refuses. What it cannot read is
// ErrMalformed with the reason: not one JSON object, a known field of the
// wrong type, another version, a job Validate refuses.
func Decode(body string) (Job, error) {
	var j Job
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		return Job{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if j.V != Version {
		return Job{}, fmt.Errorf("%w: version %d, this worker reads version %d", ErrMalformed, j.V, Version)
	}
	if err := j.Validate(); err != nil {
		return Job{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return j, nil
}
