package gcra

import (
	"fmt"
	"hash/fnv"
	"time"
)

// Calendar quotas: at most Count requests per calendar hour or day in the
// vendor's time zone, reset at the boundary (Hotelbeds' evaluation keys:
// about 50 a day; Expedia's daily quota). Unlike a bucket this is a fixed
// window: a quota spent at 23:59 is whole again at 00:00, and nothing
// refills before.
//
// The state is two numbers: the window the count belongs to (its start,
// Unix seconds, which also orders windows) and the count. A request for n
// at now, whose window starts at s:
//
//	used' = (stored window == s ? used : 0) + n,  granted iff used' ≤ Count.
//
// A denial waits for the next boundary. If every worker came back exactly
// then, the vendor would see the whole fleet's backlog in its first
// second; so each denied caller is given the boundary plus its own offset
// within the first minute (Spread, a hash of the caller's job or key:
// spread evenly over the minute, and the same for the same job, so a
// redelivered job does not draw again).
//
// Time zones: the window is computed in the vendor's location with Go's
// calendar, so a day is 23 or 25 hours long across a DST change, and the
// hour that repeats when clocks go back is two windows (each an hour of
// real time).
//
// Lambda: the provided.al2023 runtime has no zoneinfo files
// (aws/aws-lambda-dotnet#1620), so LoadLocation fails there unless the
// program embeds the database. A library must not force its 450 KB on
// every user (the time/tzdata documentation asks mains to import it): a
// Lambda main that configures quotas imports _ "time/tzdata".

// Period is a quota's calendar period.
type Period string

// Periods.
const (
	Hour Period = "hour"
	Day  Period = "day"
)

// SpreadWindow is how long after a reset the callers a spent quota
// deferred come back over.
const SpreadWindow = time.Minute

// Quota is a calendar quota: at most Count per Period in Location.
type Quota struct {
	Count  int
	Period Period
	// Location is the vendor's time zone (time.LoadLocation of its IANA
	// name); nil means UTC.
	Location *time.Location
}

// LoadQuota builds a quota from its configuration: count, "hour" or
// "day", and an IANA time zone name ("" for UTC).
func LoadQuota(count int, period, timeZone string) (Quota, error) {
	loc, err := time.LoadLocation(timeZone)
	if err != nil {
		return Quota{}, argErr("quota.time_zone", "%q: %v; want an IANA name such as Europe/Amsterdam (on Lambda the program must import _ \"time/tzdata\")", timeZone, err)
	}
	q := Quota{Count: count, Period: Period(period), Location: loc}
	return q, q.Validate()
}

// Validate names the field that is wrong.
func (q Quota) Validate() error {
	switch {
	case q.Count < 1:
		return argErr("quota.count", "%d, want ≥ 1", q.Count)
	case q.Period != Hour && q.Period != Day:
		return argErr("quota.period", "%q, want %q or %q", q.Period, Hour, Day)
	}
	return nil
}

func (q Quota) loc() *time.Location {
	if q.Location == nil {
		return time.UTC
	}
	return q.Location
}

// Window is the calendar window holding t: [start, end).
func (q Quota) Window(t time.Time) (start, end time.Time) {
	local := t.In(q.loc())
	if q.Period == Hour {
		// Truncate the local clock to the hour in absolute time: the hour
		// a fall-back repeats stays two distinct windows.
		start = local.Add(-time.Duration(local.Minute())*time.Minute - time.Duration(local.Second())*time.Second - time.Duration(local.Nanosecond()))
		return start, start.Add(time.Hour)
	}
	y, m, d := local.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, q.loc()), time.Date(y, m, d+1, 0, 0, 0, 0, q.loc())
}

// QuotaState is what the store keeps: the window Used counts in (its
// start, Unix seconds; 0 for none).
type QuotaState struct {
	Window int64
	Used   int
}

// QuotaDecision is the outcome of a request against a quota.
type QuotaDecision struct {
	Allowed bool
	// Next is the state to store when allowed: the window of now and the
	// count including this request. Its Window is also what the store's
	// write is conditioned on.
	Next QuotaState
	// Remaining is what is left in now's window after this request (or
	// without it, when denied).
	Remaining int
	// Reset is the end of now's window.
	Reset time.Time
	// RetryAt is, when denied, when to come back: Reset plus the caller's
	// spread offset.
	RetryAt time.Time
}

// Decide applies a request for n at now to the stored state. spread is
// the caller's offset into the first minute after a reset (Spread), used
// only for a denial. n > Count is an *ArgumentError matching
// ErrNeverGrantable.
func (q Quota) Decide(st QuotaState, now time.Time, n int, spread time.Duration) (QuotaDecision, error) {
	if err := q.Validate(); err != nil {
		return QuotaDecision{}, err
	}
	if n < 1 {
		return QuotaDecision{}, argErr("n", "%d, want ≥ 1", n)
	}
	if n > q.Count {
		return QuotaDecision{}, &ArgumentError{Field: "n", Reason: fmt.Sprintf("%d, the quota allows %d per %s", n, q.Count, q.Period), never: true}
	}
	start, end := q.Window(now)
	used := 0
	if st.Window == start.Unix() {
		used = st.Used
	}
	d := QuotaDecision{Reset: end}
	if used+n > q.Count {
		d.Remaining = max(q.Count-used, 0)
		d.RetryAt = end.Add(min(max(spread, 0), SpreadWindow-time.Microsecond))
		return d, nil
	}
	d.Allowed = true
	d.Next = QuotaState{Window: start.Unix(), Used: used + n}
	d.Remaining = q.Count - d.Next.Used
	return d, nil
}

// Spread is id's offset into the first minute after a reset: a hash, so
// evenly spread over many ids and the same for one id on every worker.
func Spread(id string) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return time.Duration(h.Sum64() % uint64(SpreadWindow/time.Microsecond) * uint64(time.Microsecond))
}
