package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/resync"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// The -resync scenario: resyncHotel's PMS history holds a year of every
// mapped cell (resyncDays from resyncFrom) that no OTA holds, and a resync
// of its whole connections is sent a quarter into the live stream, which
// goes on changing that hotel as the others.
const (
	resyncHotel = "hotel-0"
	resyncFrom  = "2027-01-01"
	resyncDays  = 365
)

// resyncCells are the hotel's cells per kind as its PMS keys them (as
// valuesFor: availability per room type, the rest per room type × BAR).
func resyncCells(kind string) []ari.ResyncCell {
	var out []ari.ResyncCell
	for _, room := range mappedRooms {
		plan, _ := valuesFor(kind)
		out = append(out, ari.ResyncCell{RoomType: room, RatePlan: plan})
	}
	return out
}

// mappingJSON is the resync hotel's code mapping on each connection: the
// OTAs' ids are the PMS codes, so that a resync of the whole connection
// knows its cells (resync.Cells) and the copies read back compare as they
// are.
func mappingJSON() string {
	rooms := make([]string, len(mappedRooms))
	for i, r := range mappedRooms {
		rooms[i] = fmt.Sprintf("%q: %q", r, r)
	}
	return fmt.Sprintf(`, "room_types": {%s}, "rate_plans": {"BAR": "BAR"}`, strings.Join(rooms, ", "))
}

// seedResync writes the hotel's year into the state table, a change per
// cell and calendar month as its PMS's past would have, and records it as
// the newest values unless a live change overtakes them. It returns the
// changes written, which the report follows to the OTAs.
func seedResync(ctx context.Context, st *stack, tr *truth) ([]ari.Change, error) {
	store := &ari.Store{DB: st.db, Table: st.stateTable}
	from, _ := time.Parse(ari.DateLayout, resyncFrom)
	end := from.AddDate(0, 0, resyncDays-1)
	var out []ari.Change
	for _, kind := range ari.Kinds {
		for _, cell := range resyncCells(kind) {
			for m := from; !m.After(end); m = m.AddDate(0, 1, 0) {
				to := m.AddDate(0, 1, -1)
				if to.After(end) {
					to = end
				}
				_, values := valuesFor(kind)
				c := ari.Change{EventID: fmt.Sprintf("seed-%s-%s-%s", kind, cell.RoomType, m.Format("2006-01")), PropertyID: resyncHotel,
					Sequence: tr.next(resyncHotel), Kind: kind, RoomType: cell.RoomType, RatePlan: cell.RatePlan,
					From: m.Format(ari.DateLayout), To: to.Format(ari.DateLayout), Values: values}
				if _, err := store.Apply(ctx, c); err != nil {
					return nil, fmt.Errorf("seed the resync hotel's state: %w", err)
				}
				tr.recordValues(c)
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// startResync sends the whole-connection resync of the hotel at at, as
// `fleetbucket resync hotel-0` would, and returns when it was sent.
func startResync(ctx context.Context, st *stack, at time.Duration) (time.Time, error) {
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(at):
	}
	from, _ := time.Parse(ari.DateLayout, resyncFrom)
	r := ari.Resync{ResyncID: "demo-resync", PropertyID: resyncHotel, From: resyncFrom, To: from.AddDate(0, 0, resyncDays-1).Format(ari.DateLayout)}
	now := time.Now()
	return now, resync.Send(ctx, st.sqs, st.changesURL, r, now)
}

// resyncRun is what the report needs of the resync.
type resyncRun struct {
	seeded []ari.Change
	sent   time.Time
}

// resyncReport prints, per endpoint, when the last seeded date reached
// the OTA (each date holding the seeded values or a newer change's), the
// requests the resync needed at the largest messages the format allows,
// what live pushes left of the quota meanwhile, and the floor those give;
// then the live latency of changes published during the resync against
// the others'.
func resyncReport(out io.Writer, o options, lim gcra.Limit, otas map[string]*mockota.Server, copies map[string]*otacopy.Copy, tr *truth, t *tally, rs resyncRun) {
	fmt.Fprintf(out, "  resync of %s (%d days × %d cells a kind, sent %.1fs into the run):\n", resyncHotel, resyncDays, len(mappedRooms), rs.sent.Sub(t.start).Seconds())
	var end time.Time
	floor := time.Duration(0)
	for _, ch := range channels {
		for _, kind := range ch.endpoints {
			done, unreached, first := time.Time{}, 0, ""
			items := map[string]int{} // per month
			for _, c := range rs.seeded {
				if c.Kind != kind {
					continue
				}
				for _, d := range c.Dates() {
					items[d[:7]]++
					at, ok := reached(o, ch, copies, tr, change{Change: c, at: rs.sent}, otacopy.Day{HotelRef: c.PropertyID, Kind: kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d})
					if !ok {
						if unreached++; first == "" {
							first = fmt.Sprintf(", first %s/%s %s", c.RoomType, c.RatePlan, d)
						}
					} else if at.After(done) {
						done = at
					}
				}
			}
			need := requestsNeeded(ch.formatOf(o), items)
			live, bulk := classTimes(otas[ch.name], ch, kind, rs.sent)
			f := quotaFloor(need, lim.Rate, live, rs.sent)
			floor = max(floor, f)
			if done.After(end) {
				end = done
			}
			span := done.Sub(rs.sent)
			fmt.Fprintf(out, "    %-26s in sync after %5.1fs (%d dates unreached%s); bulk requests %3d (%d at the largest messages), live %3d meanwhile: floor %5.1fs\n",
				ch.name+" / "+kind, span.Seconds(), unreached, first, bulk, need, countUntil(live, done), f.Seconds())
		}
	}
	during, outside := liveLatencies(o, copies, tr, rs.sent, end)
	fmt.Fprintf(out, "    the hotel in sync %.1fs after the resync was sent; the quota-bound floor %.1fs (%.2f×: the time the quota, less the live requests that went, takes to carry the requests needed)\n",
		end.Sub(rs.sent).Seconds(), floor.Seconds(), end.Sub(rs.sent).Seconds()/max(floor.Seconds(), 0.001))
	fmt.Fprintf(out, "    live change → OTA latency of changes sent during the resync: %s; of the others: %s\n", quantiles(during), quantiles(outside))
}

// classTimes are the accepted requests of ch's kind endpoint from since
// on: the live ones' arrivals, and how many bulk ones (a bulk job's id
// names its owner token, "b-…").
func classTimes(srv *mockota.Server, ch channel, kind string, since time.Time) (live []time.Time, bulk int) {
	cred := "token-TOKEN_" + strings.ToUpper(ch.name)
	for _, r := range srv.Accepted() {
		if r.Credential != cred || r.Endpoint != ch.meterOf(kind) || r.At.Before(since) {
			continue
		}
		if strings.Contains(r.JobID, "@b-") {
			bulk++
		} else {
			live = append(live, r.At)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Before(live[j]) })
	return live, bulk
}

// quotaFloor is how long after from the quota, at rate, less the live
// requests that went (live, sorted), first leaves room for need requests:
// the earliest the resync could have been carried beside the live stream
// as it ran (its burst left out: the live stream keeps it spent).
func quotaFloor(need int, rate float64, live []time.Time, from time.Time) time.Duration {
	spent := 0
	for _, at := range live {
		// Before this live request, the quota had room for all of need.
		if t := from.Add(time.Duration(float64(need+spent) / rate * float64(time.Second))); t.Before(at) {
			return t.Sub(from)
		}
		spent++
	}
	return time.Duration(float64(need+spent) / rate * float64(time.Second))
}

func countUntil(ts []time.Time, end time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.After(end) {
			n++
		}
	}
	return n
}

// requestsNeeded is the fewest requests that carry items (dates per
// month) in the format's largest messages: one calendar month per request
// where the format splits by month, at most its MaxItems (and the
// endpoint's default max_items a push) each.
func requestsNeeded(name string, items map[string]int) int {
	f, _ := format.Lookup(name)
	per := config.DefaultMaxItems
	if m := f.Traits().MaxItems; m > 0 {
		per = min(per, m)
	}
	if f.Traits().SplitBy != format.SplitMonth {
		n := 0
		for _, v := range items {
			n += v
		}
		return (n + per - 1) / per
	}
	need := 0
	for _, v := range items {
		need += (v + per - 1) / per
	}
	return need
}

// liveLatencies are the change → OTA latencies (all endpoints a change
// fans out to) of the live changes sent within [from, to], and of the
// others.
func liveLatencies(o options, copies map[string]*otacopy.Copy, tr *truth, from, to time.Time) (during, outside []time.Duration) {
	for _, c := range tr.changes {
		for _, ch := range channelsFor(c.Kind) {
			var last time.Time
			for _, d := range c.Dates() {
				at, ok := reached(o, channelNamed(ch), copies, tr, c, otacopy.Day{HotelRef: c.PropertyID, Kind: c.Kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d})
				if !ok {
					last = time.Time{}
					break
				}
				if at.After(last) {
					last = at
				}
			}
			if last.IsZero() {
				continue
			}
			if !c.at.Before(from) && !c.at.After(to) {
				during = append(during, last.Sub(c.at))
			} else {
				outside = append(outside, last.Sub(c.at))
			}
		}
	}
	return during, outside
}

func quantiles(l []time.Duration) string {
	if len(l) == 0 {
		return "none"
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return fmt.Sprintf("p50 %v, p99 %v over %d", pct(l, 0.5), pct(l, 0.99), len(l))
}
