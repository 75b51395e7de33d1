package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A lane trace, to follow the slowest days of a run through the pipeline:
// with FLEETBUCKET_SIM_LANE_TRACE naming a file, the run records what
// happened to every lane item (a property and kind; the channel is in the
// record) and, at its end, writes the slowest days of each minute (the
// ledger's freshness samples over 20 s, by the minute they reached the
// OTA) and every record of the lane items those days belong to, and of
// those FLEETBUCKET_SIM_LANE_TRACE_LANES names (property/kind, comma
// separated: p00000/restrictions; "all": every lane), which a violation
// may point at. One
// record a line, times in ms of simulated time from the run's start:
//
//	SLOW <minute>' <took> <channel> <lane> <room>/<plan> <day> seq <n> published <t> accepted <t>
//	<t> <lane> C seq <n> <event> <room>/<plan> <from>+<days>   the PMS sent a change
//	<t> <lane> Q <queue> <msg> delay <d> change|job ...        a message was sent (a job: its channel, token, counters, times)
//	<t> <lane> R inv <n> <queue> <msg> receive <n> die <d> ... invocation n got the message (die ≥ 0: it dies that long after it began)
//	<t> <lane> J inv <n> <channel> <token> <outcome> ...       a job's result (at its invocation's end; inv -1: a sweep)
//	<t> <lane> F inv <n> <queue> <msg> <error>                 the message failed (stays on its queue)
//	<t> <lane> L <call site> ok|cond <channel>=<owner>..<lease>/<pending> ...  a write of the lanes' item and what it left
//	<t> I inv <n> <queue> <messages> ended <t> died <bool>     an invocation, at its start
//
// Owner tokens are cut to 10 characters (m-: a mark's, t-: a claim's).
// The trace only observes: it takes no simulated time and changes no call.
type laneTrace struct {
	path  string
	start time.Time

	mu    sync.Mutex
	lines map[string][]string // by lane (property/kind)
	other []string
	inv   int
}

// newLaneTrace is the trace FLEETBUCKET_SIM_LANE_TRACE asks for, or nil.
func newLaneTrace(start time.Time) *laneTrace {
	p := os.Getenv("FLEETBUCKET_SIM_LANE_TRACE")
	if p == "" {
		return nil
	}
	return &laneTrace{path: p, start: start, lines: map[string][]string{}}
}

func (t *laneTrace) ms(when time.Time) string {
	return fmt.Sprintf("%.3f", float64(when.Sub(t.start).Microseconds())/1000)
}

func (t *laneTrace) add(lane, format string, args ...any) {
	if t == nil {
		return
	}
	line := t.ms(time.Now()) + " " + lane + " " + fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.lines[lane] = append(t.lines[lane], line)
	t.mu.Unlock()
}

func (t *laneTrace) newInvocation() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inv++
	return t.inv
}

func laneName(prop, kind string) string { return prop + "/" + kind }

// laneOfBody is the lane a queue message is about: a change's property
// and kind, or a deferred job's, with the job. A change is read for those
// two fields only: ari.Parse's validation of every message was a tenth of
// an adversary case's CPU, for a trace that only names the lane.
func laneOfBody(body string) (string, *job.Job) {
	var ev struct {
		Source string `json:"source"`
		Detail struct {
			PropertyID string `json:"property_id"`
			Kind       string `json:"kind"`
		} `json:"detail"`
	}
	if json.Unmarshal([]byte(body), &ev) == nil && ev.Source == "pms" && ev.Detail.PropertyID != "" {
		return laneName(ev.Detail.PropertyID, ev.Detail.Kind), nil
	}
	j, err := job.Decode(body)
	if err != nil {
		return "", nil
	}
	return laneOfJob(j.ID), &j
}

// laneOfJob reads the lane from a lane job's id (lane.ID.String()@token).
func laneOfJob(id string) string {
	f := strings.SplitN(id, "#", 3)
	if len(f) < 3 {
		return "?"
	}
	return laneName(f[0], f[1])
}

func tokenOfJob(id string) string {
	_, tok, _ := strings.Cut(id, "@")
	return short(tok)
}

func short(tok string) string {
	if len(tok) > 10 {
		return tok[:10]
	}
	return tok
}

func (t *laneTrace) put(queue, id, body string, delay time.Duration) {
	if t == nil {
		return
	}
	lane, j := laneOfBody(body)
	if lane == "" {
		return
	}
	what := "change"
	if j != nil {
		var ref struct {
			SeenOwner string   `json:"seen_owner"`
			Pushed    []string `json:"pushed"`
		}
		_ = json.Unmarshal(j.Payload, &ref)
		what = fmt.Sprintf("job %s %s deferrals %d failures %d tries %d not_before %s due %s first_seen %s seen_owner %s pushed %d",
			j.Channel, tokenOfJob(j.ID), j.Deferrals, j.Failures, j.Tries, t.at(j.NotBefore), t.at(j.Due), t.at(j.FirstSeen), short(ref.SeenOwner), len(ref.Pushed))
	}
	t.add(lane, "Q %s %s delay %v %s", queue, id, delay, what)
}

func (t *laneTrace) at(when time.Time) string {
	if when.IsZero() {
		return "-"
	}
	return t.ms(when)
}

func (t *laneTrace) received(inv int, queue string, m *Message, die time.Duration) {
	if t == nil {
		return
	}
	lane, j := laneOfBody(m.Body)
	what := ""
	if j != nil {
		what = fmt.Sprintf(" job %s %s deferrals %d", j.Channel, tokenOfJob(j.ID), j.Deferrals)
	}
	t.add(lane, "R inv %d %s %s receive %d die %v%s", inv, queue, m.ID, m.Receives, die, what)
}

func (t *laneTrace) result(inv int, r dispatch.Result) {
	if t == nil {
		return
	}
	ch, _, _ := strings.Cut(r.Bucket, "#")
	t.add(laneOfJob(r.JobID), "J inv %d %s %s %s wait %v delayed %v lateness %v slot %s attempts %d throttled %d pushes %d items %d reason %q",
		inv, ch, tokenOfJob(r.JobID), r.Outcome, r.Wait, r.Delayed, r.Lateness, t.at(r.Slot), r.Attempts, r.Throttled, r.Pushes, r.Items, r.Reason)
}

func (t *laneTrace) failed(inv int, queue string, m *Message, err error) {
	if t == nil {
		return
	}
	lane, _ := laneOfBody(m.Body)
	t.add(lane, "F inv %d %s %s %s", inv, queue, m.ID, strings.ReplaceAll(err.Error(), "\n", " | "))
}

func (t *laneTrace) invocation(inv int, queue string, msgs []*Message, start time.Time, died bool) {
	if t == nil {
		return
	}
	line := fmt.Sprintf("%s I inv %d %s %d ended %s died %v", t.ms(start), inv, queue, len(msgs), t.ms(time.Now()), died)
	t.mu.Lock()
	t.other = append(t.other, line)
	t.mu.Unlock()
}

// laneWrite records a write of a lanes item: who owns each of its lanes
// after it, and how many elements each holds.
func (t *laneTrace) laneWrite(key map[string]types.AttributeValue, site, outcome string, item map[string]types.AttributeValue) {
	if t == nil {
		return
	}
	pk, _ := key["pk"].(*types.AttributeValueMemberS)
	sk, _ := key["sk"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil || sk.Value != "lanes" {
		return
	}
	prop, kind, _ := strings.Cut(pk.Value, "#")
	var owners []string
	for name, v := range item {
		suffix, ok := strings.CutPrefix(name, "o:")
		if !ok {
			continue
		}
		o, _ := v.(*types.AttributeValueMemberS)
		lease := ""
		if l, ok := item["l:"+suffix].(*types.AttributeValueMemberN); ok {
			var us int64
			fmt.Sscan(l.Value, &us)
			lease = t.ms(time.UnixMicro(us))
		}
		n := 0
		if d, ok := item["d:"+suffix].(*types.AttributeValueMemberSS); ok {
			n = len(d.Value)
		}
		ch, _, _ := strings.Cut(suffix, "#")
		owners = append(owners, fmt.Sprintf("%s=%s..%s/%d", ch, short(o.Value), lease, n))
	}
	for name, v := range item {
		suffix, ok := strings.CutPrefix(name, "d:")
		if !ok || item["o:"+suffix] != nil {
			continue
		}
		ch, _, _ := strings.Cut(suffix, "#")
		owners = append(owners, fmt.Sprintf("%s=-/%d", ch, len(v.(*types.AttributeValueMemberSS).Value)))
	}
	sort.Strings(owners)
	t.add(laneName(prop, kind), "L %s %s %s", site, outcome, strings.Join(owners, " "))
}

// write saves the slowest days of each minute and the records of their
// lanes.
func (t *laneTrace) write(slow []slowDay, channels []string) error {
	f, err := os.Create(t.path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	want := map[string]bool{}
	for _, s := range slow {
		lane := laneName(propID(int(s.prop)), kindNames[s.kind])
		want[lane] = true
		fmt.Fprintf(w, "SLOW %d' %v %s %s %s/%s %s seq %d published %.3f accepted %.3f\n", int(s.accepted/time.Minute), (s.accepted - s.published).Round(time.Millisecond),
			channels[s.ch], lane, roomNames[s.room], planNames[s.plan], day0.AddDate(0, 0, s.day).Format("2006-01-02"), s.seq,
			float64(s.published.Microseconds())/1000, float64(s.accepted.Microseconds())/1000)
	}
	named := os.Getenv("FLEETBUCKET_SIM_LANE_TRACE_LANES")
	for _, l := range strings.Split(named, ",") {
		if l != "" {
			want[l] = true
		}
	}
	t.mu.Lock()
	if named == "all" {
		// A rare failure's lanes are not known before the run that meets it.
		for l := range t.lines {
			want[l] = true
		}
	}
	lanes := make([]string, 0, len(want))
	for l := range want {
		lanes = append(lanes, l)
	}
	sort.Strings(lanes)
	for _, l := range lanes {
		for _, line := range t.lines[l] {
			w.WriteString(line)
			w.WriteByte('\n')
		}
	}
	for _, line := range t.other {
		w.WriteString(line)
		w.WriteByte('\n')
	}
	t.mu.Unlock()
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// slowDay is one freshness sample: a day of a row reaching one channel.
type slowDay struct {
	ch                  int
	prop                int32
	kind, room, plan    uint8
	day                 int
	seq                 int32
	published, accepted time.Duration
}

// slowest keeps, per minute of acceptance, the slowDaysPerMinute slowest
// days, one per lane and channel.
type slowest struct {
	byMinute [][]slowDay
}

const slowDaysPerMinute = 4

// slowFrom is the shortest freshness the trace keeps a day for: a quiet
// fleet's days take about a second, so this skips millions of samples.
const slowFrom = 20 * time.Second

func (s *slowest) add(d slowDay) {
	m := int(d.accepted / time.Minute)
	for len(s.byMinute) <= m {
		s.byMinute = append(s.byMinute, nil)
	}
	list := s.byMinute[m]
	took := d.accepted - d.published
	for i, o := range list {
		if o.ch == d.ch && o.prop == d.prop && o.kind == d.kind {
			if o.accepted-o.published < took {
				list[i] = d
			}
			return
		}
	}
	if len(list) < slowDaysPerMinute {
		s.byMinute[m] = append(list, d)
		return
	}
	least := 0
	for i, o := range list {
		if o.accepted-o.published < list[least].accepted-list[least].published {
			least = i
		}
	}
	if list[least].accepted-list[least].published < took {
		list[least] = d
	}
}

func (s *slowest) all() []slowDay {
	var out []slowDay
	for _, l := range s.byMinute {
		sort.Slice(l, func(i, j int) bool { return l[i].accepted-l[i].published > l[j].accepted-l[j].published })
		out = append(out, l...)
	}
	return out
}

// LaneTrace is the lane trace's records of property prop's lane item of
// kind, in the order they were made, or nil without a trace
// (Scenario.TraceLanes, FLEETBUCKET_SIM_LANE_TRACE).
func (r *Report) LaneTrace(prop int, kind string) []string {
	t := r.lanes
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines[laneName(propID(prop), kind)]...)
}
