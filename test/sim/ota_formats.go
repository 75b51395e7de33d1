package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// Vendors that speak the OTAs' own formats (Expedia AR, OpenTravel), read
// with test/otaformat's model of those vendors (which shares no code with
// sdk/pipeline/format), and what they refuse inside a 200 at each scope.
// Their messages carry no sequence, so the ledger names the sequence of a
// day's value from what the PMS published (wireLedger).

// WireSpec is a vendor that speaks an XML format and what it refuses.
type WireSpec struct {
	// Format is the channel's format: "expedia-ar" or "opentravel".
	Format string
	// Unmapped is a room type the vendor does not know at one hotel
	// (property index, room index): a push naming it is refused as the
	// item's fault (OpenTravel names its parts; Expedia refuses the whole
	// message, and the fleet must find the change by halves).
	Unmapped *[2]int32
	// UnnamedParts: an OpenTravel refusal of the unmapped room names no
	// part (the message's scope).
	UnnamedParts bool
	// BadLogin is a span of the run during which the vendor refuses the
	// first credential's login inside a 200 (Expedia 1001, OpenTravel
	// EWT 4), as after a rotation the fleet has not read yet.
	BadLogin [2]time.Duration
	// HotelDenied is a span during which the vendor refuses one hotel
	// (property index HotelProp): Expedia with a 403 and its XML error,
	// OpenTravel inside a 200 (EWT 6 / ERR 497, or ERR 392 when
	// HotelCode392).
	HotelDenied  [2]time.Duration
	HotelProp    int32
	HotelCode392 bool
	// Malformed is the share of accepted pushes answered with XML cut
	// short (the vendor applied them).
	Malformed float64
	// drew: the part that built the spec drew its format.
	drew bool
}

func (w *WireSpec) speaks() bool { return w != nil && w.Format != "" }

// xmlScenario says whether any channel speaks an XML format: the PMS then
// sends values in the formats' vocabulary.
func (sc *Scenario) xmlScenario() bool {
	for _, c := range sc.Channels {
		if c.Vendor.Wire.speaks() {
			return true
		}
	}
	return false
}

// changeValues are a change's values: {"value": v} as the json format
// passes them through, or, when a channel speaks an XML format, the
// formats' vocabulary (docs/configuration.md, "Message formats"), which
// json passes through too. Availability is then the room type's (Expedia
// AR has no inventory of a rate plan).
func (s *sim) changeValues(c *change) map[string]any {
	if !s.sc.xmlScenario() {
		return map[string]any{"value": c.value}
	}
	switch kindNames[c.kind] {
	case "availability":
		c.plan = -1
		return map[string]any{"available": c.value}
	case "rates":
		return map[string]any{"amount": c.value, "currency": "EUR"}
	}
	return map[string]any{"min_los": c.value}
}

// planName is a change's rate plan: none for -1.
func planName(p int) string {
	if p < 0 {
		return ""
	}
	return planNames[p]
}

// tokenOf is the secret of the credential whose token_env is env:
// "username:password" on a channel that speaks an XML format.
func (sc *Scenario) tokenOf(env string) string {
	for _, c := range sc.Channels {
		if c.Vendor.Wire.speaks() && strings.HasPrefix(env, "TOKEN_"+strings.ToUpper(c.Name)+"_") {
			return env + ":pw-" + env
		}
	}
	return "token-" + env
}

// wireRead is a request as the vendor reads it: the push, the credential
// it carried (the bucket's name) and whether it carried one at all, and
// the model's refusal of what it could not read.
type wireRead struct {
	push    pushBody
	perr    error
	cred    string
	credOK  bool
	refusal *otaformat.Refusal
	body    []byte
}

// wireStats are what an XML vendor refused and cut, and the requests
// that came without the credential's token (a violation).
type wireStats struct {
	CredentialRefusals, HotelRefusals, ItemRefusals, Malformed int
	NoCredential                                               int
	FirstNoCredential                                          string
}

// read reads a request in the vendor's format.
func (v *Vendor) read(r *http.Request, body []byte) wireRead {
	w := v.spec.Wire
	if !w.speaks() {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		p, err := decodePush(body)
		return wireRead{push: p, perr: err, cred: tok, credOK: strings.HasPrefix(tok, "token-TOKEN_")}
	}
	kind := strings.TrimPrefix(r.URL.Path, "/v1/")
	rules := otaformat.Rules{}
	var m otaformat.Message
	var err error
	var user, pass string
	switch w.Format {
	case "expedia-ar":
		m, err = otaformat.DecodeExpediaAR(body, kind, rules)
		user, pass = m.User, m.Password
	default:
		m, err = otaformat.DecodeOpenTravel(body, kind, rules)
		if raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic "); ok {
			if b, derr := base64.StdEncoding.DecodeString(raw); derr == nil {
				user, pass, _ = strings.Cut(string(b), ":")
			}
		}
	}
	out := wireRead{body: body, cred: user, credOK: user != "" && pass == "pw-"+user}
	var ref *otaformat.Refusal
	if errors.As(err, &ref) {
		out.refusal = ref
		return out
	}
	if err != nil {
		out.perr = err
		return out
	}
	out.push = fromMessage(m, kind)
	return out
}

// fromMessage is what a vendor read as the json format's push: days with
// their value and no sequence.
func fromMessage(m otaformat.Message, kind string) pushBody {
	p := pushBody{HotelRef: m.Hotel, Kind: kind}
	at := map[[2]string]int{}
	keys := make([]otaformat.Key, 0, len(m.Values))
	for k := range m.Values {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b otaformat.Key) int {
		return strings.Compare(a.RoomType+"/"+a.RatePlan+"/"+a.Date, b.RoomType+"/"+b.RatePlan+"/"+b.Date)
	})
	for _, k := range keys {
		vals := m.Values[k]
		var val *int32
		for _, f := range []string{"available", "amount", "min_los"} {
			if x, ok := vals[f]; ok {
				if n, ok := wireInt(x); ok {
					val = &n
				}
			}
		}
		rp := [2]string{k.RoomType, k.RatePlan}
		i, ok := at[rp]
		if !ok {
			i = len(p.Items)
			at[rp] = i
			p.Items = append(p.Items, pushItem{RoomType: k.RoomType, RatePlan: k.RatePlan})
		}
		d := pushDay{Date: k.Date}
		d.Values.Value = val
		p.Items[i].Days = append(p.Items[i].Days, d)
	}
	return p
}

// wireInt reads a value the model decoded: an int, or a decimal string
// (amounts) that is whole.
func wireInt(x any) (int32, bool) {
	switch t := x.(type) {
	case int:
		return int32(t), true
	case string:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || f != float64(int32(f)) {
			return 0, false
		}
		return int32(f), true
	}
	return 0, false
}

func within(span [2]time.Duration, start, now time.Time) bool {
	return span[1] > span[0] && !now.Before(start.Add(span[0])) && now.Before(start.Add(span[1]))
}

// refuseWire is the vendor's refusal of a request it read, if it refuses
// it: what the model could not read, the first credential's login during
// BadLogin, the hotel during HotelDenied, a push naming the unmapped
// room. Under v.mu.
func (v *Vendor) refuseWire(rd wireRead, now time.Time) (status int, body []byte, refused bool) {
	w := v.spec.Wire
	if !w.speaks() {
		return 0, nil, false
	}
	kind := rd.push.Kind
	answer := func(ref *otaformat.Refusal) (int, []byte, bool) {
		v.Refused++
		if w.Format == "expedia-ar" {
			return ref.Status, otaformat.AnswerExpediaAR(ref), true
		}
		return ref.Status, otaformat.AnswerOpenTravel(kind, ref), true
	}
	if rd.refusal != nil {
		return answer(rd.refusal)
	}
	if strings.HasSuffix(rd.cred, "_0") && within(w.BadLogin, v.start, now) {
		v.CredentialRefusals++
		if w.Format == "expedia-ar" {
			return answer(otaformat.ExpediaARBadLogin())
		}
		return answer(otaformat.OpenTravelBadLogin())
	}
	hotel := strings.SplitN(rd.push.HotelRef, "~", 2)[0]
	prop, known := v.props[hotel]
	if known && prop == w.HotelProp && within(w.HotelDenied, v.start, now) {
		v.HotelRefusals++
		switch {
		case w.Format == "expedia-ar":
			return answer(otaformat.ExpediaARHotelDenied(rd.push.HotelRef))
		case w.HotelCode392:
			return answer(&otaformat.Refusal{Status: 200, Code: "392", Text: "Invalid hotel code " + rd.push.HotelRef})
		}
		ref := otaformat.OpenTravelHotelDenied(rd.push.HotelRef)
		ref.Status = 200
		return answer(ref)
	}
	if u := w.Unmapped; u != nil && known && prop == u[0] {
		// Read again as a vendor that does not know the room at this
		// hotel: the model refuses the parts that name it.
		room := roomNames[u[1]]
		rules := otaformat.Rules{MappedRooms: map[string]bool{}}
		for _, n := range roomNames {
			rules.MappedRooms[n] = n != room
		}
		var err error
		if w.Format == "expedia-ar" {
			_, err = otaformat.DecodeExpediaAR(rd.body, kind, rules)
		} else {
			_, err = otaformat.DecodeOpenTravel(rd.body, kind, rules)
		}
		var ref *otaformat.Refusal
		if errors.As(err, &ref) {
			v.ItemRefusals++
			if w.Format == "opentravel" {
				ref.Text = fmt.Sprintf("Room ID %s is not valid for hotel %s", room, rd.push.HotelRef)
				if w.UnnamedParts {
					ref.RecordIDs = nil
				}
			}
			return answer(ref)
		}
	}
	return 0, nil, false
}

// success is the vendor's answer to an accepted push in its format: over
// 64 KB of warnings when big, cut short (malformed) now and then.
func (v *Vendor) success(kind string, big bool) []byte {
	w := v.spec.Wire
	var warn []string
	if big {
		for range 1200 {
			warn = append(warn, "Rate is more than 50% below the average rate of the last 30 days")
		}
	}
	var body []byte
	if w.Format == "expedia-ar" {
		body = otaformat.AnswerExpediaAR(nil, warn...)
	} else {
		body = otaformat.AnswerOpenTravel(kind, nil, warn...)
	}
	if w.Malformed > 0 && v.rng.Float64() < w.Malformed {
		v.Malformed++
		// Cut inside the root's first child: no Success, no Errors.
		i := strings.Index(string(body), "RS xmlns")
		body = body[:i+len("RS xmlns")+12]
	}
	return body
}

// wireLedger keeps every (sequence, value) the PMS published for each day,
// so that a value an XML vendor received names the sequences it can be:
// every one published with that value (acceptWire).
type wireLedger map[wireDay][][2]int32

type wireDay struct {
	k rowKey // with its block
	d int
}

func (w wireLedger) publish(k rowKey, d int, seq, v int32) {
	w[wireDay{k, d}] = append(w[wireDay{k, d}], [2]int32{seq, v})
}

// AcceptWire records an XML vendor's accepted push of value v for day of
// row k. The OTA holds the day at the newest sequence published with v (a
// value published twice is as fresh as its newer publication); it went
// back only if every sequence v can be is older than what the day's
// history can have reached (heldRow.wentBack). A value no change published
// is sequence 0.
func (l *Ledger) AcceptWire(ch int, k rowKey, day int, v int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk, d := at(k, day)
	var could []int32
	for _, p := range l.wire[wireDay{bk, d}] {
		if p[1] == v {
			could = append(could, p[0])
		}
	}
	if len(could) == 0 {
		could = []int32{0}
	}
	l.accept(ch, k, day, slices.Max(could), v, could)
}

// secrets is Secrets Manager: it answers every secret the config names
// (the token the credential's token_env maps to), after SQS's latency,
// and fails during Faults.SecretsOutage.
type secrets struct {
	s     *sim
	mu    sync.Mutex
	Reads int
	Fails int
}

func (sm *secrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	sm.s.mu.Lock()
	lat := sm.s.sc.SQSLatency.draw(sm.s.skewRNG)
	sm.s.mu.Unlock()
	if err := sleep(ctx, lat); err != nil {
		return nil, err
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.Reads++
	if within(sm.s.sc.Faults.SecretsOutage, sm.s.start, time.Now()) {
		sm.Fails++
		return nil, errors.New("sim: Secrets Manager unavailable (ServiceUnavailableException)")
	}
	id := aws.ToString(in.SecretId)
	env, ok := strings.CutPrefix(id, "sim/")
	if !ok {
		return nil, fmt.Errorf("sim: no secret %q (ResourceNotFoundException)", id)
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(sm.s.sc.tokenOf(env))}, nil
}

// credentialOf is a credential's entry in connections.json: a secret when
// the scenario has Secrets Manager fail, else an environment variable.
func (sc *Scenario) credentialOf(env string) string {
	if sc.Faults.SecretsOutage[1] > sc.Faults.SecretsOutage[0] {
		return fmt.Sprintf(`{"secret_id": "sim/%s"}`, env)
	}
	return fmt.Sprintf(`{"token_env": %q}`, env)
}

// retries counts, per change event, how often a failed change was sent
// again to the changes queue (syncer.Retry): the invariant is that a
// change whose push failed is deferred, not sent again and again.
type retries struct {
	*SQS
	start time.Time
	mu    sync.Mutex
	count map[string]int
	// dups counts, per change event, the receives that handed a message
	// of the changes queue carrying it out a second time: each failing
	// delivery sends its own copy, so each duplicate may start a line of
	// copies of its own, maxResends long.
	dups map[string]int
	// why is, per change event, each failure that sent it again: when,
	// the attempt, the error. A replay is not bit for bit, so a
	// violation seen once carries its own evidence.
	why map[string][]string
}

// duplicated notes a duplicate delivery of m (SQS.duplicated: under the
// queues' lock, which r's never waits on while holding its own).
func (r *retries) duplicated(q *Queue, m *Message) {
	if q.Name != "changes" {
		return
	}
	var ev struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(m.Body), &ev) != nil || ev.ID == "" {
		return
	}
	r.mu.Lock()
	r.dups[ev.ID]++
	r.mu.Unlock()
}

// failed notes why the change in body was sent again (attempt n).
func (r *retries) failed(body string, n int, err error) {
	var ev struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(body), &ev) != nil || ev.ID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.why[ev.ID] = append(r.why[ev.ID], fmt.Sprintf("%v #%d: %.300v", time.Since(r.start).Round(time.Millisecond), n, err))
}

func (r *retries) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	r.mu.Lock()
	for _, e := range in.Entries {
		var ev struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(aws.ToString(e.MessageBody)), &ev) == nil && ev.ID != "" {
			r.count[ev.ID]++
		}
	}
	r.mu.Unlock()
	return r.SQS.SendMessageBatch(ctx, in, opts...)
}

// maxResends bounds how often one change is sent again: a failed change
// waits 10 s, 20 s, 40 s, then a minute each time, so 10 sends span eight
// minutes of failures, more than any drawn outage of the store lasts (the
// longest, 2 min, fails at most 4 deliveries of one line of its copies;
// a duplicate delivery starts another line: retries.dups). The rest is
// room for lost answers (at most 5% of writes), each failing one delivery
// at random: six of them in a row is a failure that repeats, not chance.
const maxResends = 10

// wireCheck adds the invariants of this file to r: no request without
// its credential; no change sent again more than maxResends times; no
// dead letter over a refusal of the credential or the hotel (no change
// caused one); and the stale days the check may leave out: those of the
// unmapped room, each named by a dead letter whose reason is the
// vendor's refusal of that room. It runs before the ledger's stale check.
func (s *sim) wireCheck(r *Report) {
	for _, v := range s.vendors {
		v.mu.Lock()
		if v.NoCredential > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("credential: %d requests to %s without the credential's token; first: %s", v.NoCredential, v.Name, v.FirstNoCredential))
		}
		v.mu.Unlock()
	}
	if s.retries != nil {
		s.retries.mu.Lock()
		worst, n, most := "", 0, 0
		for id, c := range s.retries.count {
			bound := maxResends * (1 + s.retries.dups[id])
			if c-bound > n-most || c-bound == n-most && id < worst {
				worst, n, most = id, c, bound
			}
		}
		if n > most {
			r.Violations = append(r.Violations, fmt.Sprintf("resent: change %s sent again %d times (at most %d: %d for each of its %d lines of copies, one and a duplicate delivery each); each failure that sent it again (time since the start, attempt, error):\n  %s", worst, n, most, maxResends, most/maxResends, strings.Join(s.retries.why[worst], "\n  ")))
		}
		s.retries.mu.Unlock()
	}
	refusedRooms := map[string]bool{} // "channel copy/property/room" a dead letter names
	for _, m := range s.sqs.DeadLetters() {
		reason := reasonOf(m)
		for _, text := range []string{"invalid username or password", "Invalid Username and/or Password", "not authorized to manage hotel", "do not have access to hotel", "Invalid hotel code"} {
			if strings.Contains(reason, text) {
				r.Violations = append(r.Violations, fmt.Sprintf("dead letter over a refusal of the credential or the hotel (no change caused it): %s: %.300s", m.ID, reason))
			}
		}
		for i, c := range s.sc.Channels {
			u := c.Vendor.Wire
			if !u.speaks() || u.Unmapped == nil {
				continue
			}
			room := roomNames[u.Unmapped[1]]
			if (strings.Contains(reason, "Room type "+room+" is not mapped") || strings.Contains(reason, "Room ID "+room+" is not valid")) &&
				strings.Contains(m.Body, propID(int(u.Unmapped[0]))) {
				refusedRooms[fmt.Sprintf("%d/%d", i, u.Unmapped[0])] = true
			}
		}
	}
	s.ledger.mu.Lock()
	s.ledger.exempt = func(copyOf int, k rowKey) bool {
		ch := s.copyOf[copyOf]
		u := s.sc.Channels[ch].Vendor.Wire
		return u.speaks() && u.Unmapped != nil && k.prop == u.Unmapped[0] && int32(k.room) == u.Unmapped[1] && refusedRooms[fmt.Sprintf("%d/%d", ch, k.prop)]
	}
	s.ledger.mu.Unlock()
}

// wireLine is what the vendor's format did, for its report line.
func (v *Vendor) wireLine() string {
	s := ""
	if w := v.spec.Wire; w.speaks() {
		s = fmt.Sprintf("; speaks %s, refused %d logins, %d hotel, %d unmapped room, answered %d cut short", w.Format,
			v.CredentialRefusals, v.HotelRefusals, v.ItemRefusals, v.Malformed)
	}
	if v.spec.HangSpan[1] > 0 {
		s += fmt.Sprintf("; hung %d", v.Hung)
	}
	return s
}
