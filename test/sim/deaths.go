package sim

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Deaths the run inflicts cost a lane time the drain must grant. An
// invocation killed mid-batch deletes nothing: its messages come back
// after the queue's visibility timeout, and that return is what resumes a
// lane whose push chain it carried (docs/design.md, "Leases recover a lane
// whose owner died": with no change after the lease, the dead batch's
// return is what comes). A lane whose backlog goes out over many
// invocations, each handing the next push to the deferred queue, meets
// each one's death chance: adversary seed 44 (20% of invocations die, a
// 30-minute vendor hang, then about 30 pushes of a bulk upload) lost 6
// minutes to each of 3-5 deaths, past a drain that counted none.
//
// laneDeaths counts, per lane (property/kind), the killed invocations
// that carried a message of it, a change or its deferred job.
type laneDeaths struct {
	by   map[string]int
	most int
	lane string // one lane that met most
}

// died counts a killed invocation's messages against their lanes, each
// lane once.
func (d *laneDeaths) died(bodies []string) {
	seen := map[string]bool{}
	for _, b := range bodies {
		l := laneOfMessage(b)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		if d.by == nil {
			d.by = map[string]int{}
		}
		if d.by[l]++; d.by[l] > d.most {
			d.most, d.lane = d.by[l], l
		}
	}
}

// grace is what the deaths cost the lane that met the most: a visibility
// timeout each, at most, since each return resumes the lane where its
// dead invocation took it up.
func (d *laneDeaths) grace(visibility time.Duration) time.Duration {
	return time.Duration(d.most) * visibility
}

// laneOfMessage is the lane a queue message is about, read by the
// harness itself (no SDK decoder): a PMS change's property and kind, or a
// lane job's, from its id (lane.ID.String()@token). "" if neither.
func laneOfMessage(body string) string {
	var m struct {
		Source string `json:"source"`
		Detail struct {
			PropertyID string `json:"property_id"`
			Kind       string `json:"kind"`
		} `json:"detail"`
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(body), &m) != nil {
		return ""
	}
	switch {
	case m.Source == "pms" && m.Detail.PropertyID != "":
		return laneName(m.Detail.PropertyID, m.Detail.Kind)
	case m.ID != "":
		if l := laneOfJob(m.ID); l != "?" {
			return l
		}
	}
	return ""
}

// death is when a killed invocation died, zero while it lives: the
// vendor asks it whether the invocation that heard a 429 lived to keep
// its silence (silence.kept).
type death struct {
	mu sync.Mutex
	at time.Time
}

func (d *death) mark() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = time.Now()
}

// before reports whether d came before t (nil: an invocation that is
// never killed).
func (d *death) before(t time.Time) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.at.IsZero() && d.at.Before(t)
}

type deathKey struct{}

// withDeath has ctx, an invocation's, carry its death to every request
// made under it. The context value is the simulation's, for its vendors:
// the code under test never reads it.
func withDeath(ctx context.Context, d *death) context.Context {
	return context.WithValue(ctx, deathKey{}, d)
}

// deathOf is the death of the invocation a request was made under, nil
// if none may die.
func deathOf(ctx context.Context) *death {
	d, _ := ctx.Value(deathKey{}).(*death)
	return d
}
