package parity

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/emf"
	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/internal/unavailable"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// Limiter is the part of *limiter.Limiter a read draws its token from.
type Limiter interface {
	Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error)
	Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error
}

// Metrics a check emits (EMF, one line a check, no dimensions).
const (
	MetricDrift    = "ParityDrift"    // stored dates the OTA holds otherwise
	MetricDays     = "ParityDays"     // stored dates compared
	MetricReads    = "ParityReads"    // read requests the OTA answered
	MetricRepairs  = "ParityRepairs"  // repair changes sent
	MetricUnstored = "ParityUnstored" // OTA products with values but no stored state
	MetricSkipped  = "ParitySkipped"  // stored dates not compared (Skipped)
)

// Checker checks connections' parity.
type Checker struct {
	Config *config.Config
	State  *ari.Store
	// Limiter meters the reads: each takes a token of the channel's read
	// bucket (config.ReadMeter) first.
	Limiter Limiter
	// HTTP sends the reads (default: a client with a 20 s timeout).
	HTTP *http.Client
	// Secret returns a credential's secret by its config.Credential.Ref.
	Secret func(ctx context.Context, ref string) (string, error)
	// Repair, if set, marks the drifted dates' lanes; nil reports only.
	Repair Repairer
	// Metrics, if set, receives one EMF line per check under Namespace.
	Metrics   io.Writer
	Namespace string
	// MaxWait bounds how long a read waits for its token (default 1 min).
	MaxWait time.Duration
	Now     func() time.Time
	// Sleep, if set, is how a read waits: between attempts, and between
	// asks of a store that did not take a throttle (default: a timer that
	// gives way to the context).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Check is one connection and window to check.
type Check struct {
	PropertyID string
	Connection config.Property
	// From and To are the window's first and last dates (inclusive).
	From, To string
}

// Report is what a check found and did.
type Report struct {
	PropertyID string `json:"property_id"`
	Channel    string `json:"channel"`
	HotelRef   string `json:"hotel_ref"`
	From       string `json:"from"`
	To         string `json:"to"`
	// Reads counts the read requests the OTA answered; Throttled those
	// it answered with a throttle first.
	Reads     int `json:"reads"`
	Throttled int `json:"throttled"`
	// Days counts the stored dates compared.
	Days    int       `json:"days"`
	Drifted []Drift   `json:"drifted"`
	Skipped []Skipped `json:"skipped,omitempty"`
	// Unstored are the OTA's products (room type, rate plan, in its ids)
	// that hold values over the window where the store holds nothing of
	// the product: reported, never repaired.
	Unstored []format.HeldCell `json:"unstored,omitempty"`
	// Repairs counts the changes sent to repair the drift.
	Repairs int `json:"repairs"`
}

// maxReadAttempts bounds the requests one read window takes: a throttle or
// a vendor failure is asked again, after Retry-After or a second.
const maxReadAttempts = 4

// Run checks one connection over a window: reads what the OTA holds,
// compares it with the stored state, repairs the drift, emits the metrics
// and returns the report. A read the vendor refuses ends the check with an
// error naming the refusal; nothing is repaired then.
func (c *Checker) Run(ctx context.Context, chk Check) (Report, error) {
	conn := chk.Connection
	rep := Report{PropertyID: chk.PropertyID, Channel: conn.Channel, HotelRef: conn.HotelRef, From: chk.From, To: chk.To}
	from, err1 := time.Parse(ari.DateLayout, chk.From)
	to, err2 := time.Parse(ari.DateLayout, chk.To)
	if err1 != nil || err2 != nil || to.Before(from) {
		return rep, fmt.Errorf("parity window %q..%q: want two dates (YYYY-MM-DD), from ≤ to", chk.From, chk.To)
	}
	rd, err := c.Config.ReadOf(conn.Channel)
	if err != nil {
		return rep, err
	}
	cred, ok := c.Config.Channels[conn.Channel].Credentials[conn.Credential]
	if !ok {
		return rep, fmt.Errorf("channel %q has no credential %q", conn.Channel, conn.Credential)
	}
	secret, err := c.Secret(ctx, cred.Ref())
	if err != nil {
		return rep, fmt.Errorf("credential %s of channel %s: %w", conn.Credential, conn.Channel, err)
	}
	bucket := limiter.Bucket{Key: config.BucketKey(conn.Channel, conn.Credential, config.ReadMeter), Limit: rd.Limit}
	held := format.Holding{}
	for _, w := range windows(chk.From, chk.To, rd.MaxDays) {
		q := format.ReadQuery{HotelRef: conn.HotelRef, From: w[0], To: w[1], Secret: format.NewSecret(secret)}
		h, throttled, err := c.read(ctx, rd, bucket, q)
		rep.Throttled += throttled
		if err != nil {
			return rep, err
		}
		rep.Reads++
		for cell, days := range h {
			if held[cell] == nil {
				held[cell] = map[string]format.Values{}
			}
			for d, v := range days {
				held[cell][d] = v
			}
		}
	}
	stored, err := c.stored(ctx, chk, held)
	if err != nil {
		return rep, err
	}
	cmp := Compare(stored, held, conn.Codes())
	rep.Days, rep.Drifted, rep.Skipped = cmp.Days, cmp.Drifted, cmp.Skipped
	rep.Unstored = unstored(stored, held, conn.Codes())
	if c.Repair != nil && len(rep.Drifted) > 0 {
		run := strconv.FormatInt(c.now().UnixMilli(), 36)
		changes, err := RepairChanges(chk.PropertyID, run, rep.Drifted, c.Config.MaxRangeDays)
		if err == nil {
			err = c.Repair.Repair(ctx, changes)
		}
		if err != nil {
			c.emit(rep)
			return rep, fmt.Errorf("repair %d drifted dates: %w", len(rep.Drifted), err)
		}
		rep.Repairs = len(changes)
	}
	c.emit(rep)
	return rep, nil
}

// read sends one read window, within maxReadAttempts.
func (c *Checker) read(ctx context.Context, rd config.Read, bucket limiter.Bucket, q format.ReadQuery) (format.Holding, int, error) {
	req, err := rd.Reader.EncodeRead(q)
	if err != nil {
		return nil, 0, err
	}
	throttled := 0
	var last format.Outcome
	for range maxReadAttempts {
		maxWait := c.MaxWait
		if maxWait <= 0 {
			maxWait = time.Minute
		}
		if _, err := c.Limiter.Wait(ctx, bucket, 1, maxWait); err != nil {
			return nil, throttled, fmt.Errorf("read %s %s..%s: no token of %s within %v: %w", q.HotelRef, q.From, q.To, bucket.Key, maxWait, err)
		}
		resp, err := c.send(ctx, rd.URL, req)
		if err != nil {
			last = format.Outcome{Verdict: format.Transient, Reason: err.Error()}
		} else {
			var h format.Holding
			if h, last = rd.Reader.DecodeRead(q, resp); last.Verdict.Applied() {
				return h, throttled, nil
			}
		}
		wait := time.Second
		switch last.Verdict {
		case format.Throttled:
			throttled++
			if last.RetryAfter > 0 {
				wait = last.RetryAfter
			}
			// The vendor meters the credential's reads: the whole fleet's
			// reads wait.
			if err := c.penalize(ctx, bucket, c.now().Add(wait), maxWait); err != nil {
				return nil, throttled, fmt.Errorf("read %s: throttled, and the bucket could not be told: %w", q.HotelRef, err)
			}
			continue
		case format.Transient:
		default:
			return nil, throttled, fmt.Errorf("read %s %s..%s refused (%s): %s", q.HotelRef, q.From, q.To, last.Scope, last.Reason)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, throttled, err
		}
	}
	return nil, throttled, fmt.Errorf("read %s %s..%s: no answer in %d attempts: %s", q.HotelRef, q.From, q.To, maxReadAttempts, last.Reason)
}

// penalize records the vendor's silence on the read bucket, asking again
// while the store is unavailable (unavailable.Retry), for at most within
// (counted in pauses, so an injected clock cannot stall it): a silence
// only this process heard is known to no other check of the credential,
// which would read inside it once the store is back (as otapush's record
// does for pushes). Any other error is returned at once.
func (c *Checker) penalize(ctx context.Context, b limiter.Bucket, until time.Time, within time.Duration) error {
	return unavailable.Retry(ctx, c.sleep, unavailable.Asks(within), func() error { return c.Limiter.Penalize(ctx, b, until) })
}

// maxReadBody bounds an answer: a month of a large hotel is a few hundred
// KB; anything past this is no answer to trust.
const maxReadBody = 16 << 20

func (c *Checker) send(ctx context.Context, url string, req format.Request) (format.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, req.Method, url+req.Path, bytes.NewReader(req.Body))
	if err != nil {
		return format.Response{}, err
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	hr.Header.Set("X-Job-Id", "parity-"+strconv.FormatInt(c.now().UnixNano(), 36))
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 20 * time.Second}
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return format.Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBody+1))
	if err != nil {
		return format.Response{}, err
	}
	if len(body) > maxReadBody {
		return format.Response{}, fmt.Errorf("answer over %d bytes: ask a shorter window (read.max_days)", maxReadBody)
	}
	return format.Response{Status: resp.StatusCode, Header: resp.Header, Body: body, Received: c.now()}, nil
}

// stored reads the state of every cell the check covers: the cells the
// OTA holds (mapped back to the PMS's codes) and those the connection's
// mapping names, of the kinds the connection receives.
func (c *Checker) stored(ctx context.Context, chk Check, held format.Holding) (map[Cell][]ari.Day, error) {
	conn := chk.Connection
	kinds := map[string]bool{}
	for _, k := range config.Kinds {
		if _, ok := c.Config.Channels[conn.Channel].Endpoints[k]; ok && conn.Receives(k) {
			kinds[k] = true
		}
	}
	back := func(m map[string]string, id string) (string, bool) {
		if m == nil {
			return id, true
		}
		for code, v := range m {
			if v == id {
				return code, true
			}
		}
		return "", false
	}
	cells := map[Cell]bool{}
	for hc := range held {
		room, ok1 := back(conn.RoomTypes, hc.RoomType)
		plan, ok2 := back(conn.RatePlans, hc.RatePlan)
		if ok1 && ok2 && kinds[hc.Kind] {
			cells[Cell{Kind: hc.Kind, RoomType: room, RatePlan: plan}] = true
		}
	}
	for room := range conn.RoomTypes {
		for k := range kinds {
			if k == "availability" {
				cells[Cell{Kind: k, RoomType: room}] = true
			}
			for plan := range conn.RatePlans {
				cells[Cell{Kind: k, RoomType: room, RatePlan: plan}] = true
			}
		}
	}
	ranges := make([]ari.Range, 0, len(cells))
	byKey := map[string]Cell{}
	for cell := range cells {
		key := ari.Change{PropertyID: chk.PropertyID, Kind: cell.Kind, RoomType: cell.RoomType, RatePlan: cell.RatePlan}.Cell()
		byKey[key] = cell
		ranges = append(ranges, ari.Range{Cell: key, From: chk.From, To: chk.To})
	}
	slices.SortFunc(ranges, func(a, b ari.Range) int {
		if a.Cell < b.Cell {
			return -1
		}
		if a.Cell > b.Cell {
			return 1
		}
		return 0
	})
	state, err := c.State.Read(ctx, ranges)
	if err != nil {
		return nil, err
	}
	out := map[Cell][]ari.Day{}
	for key, days := range state {
		if len(days) > 0 {
			out[byKey[key]] = days
		}
	}
	return out, nil
}

// unstored lists the OTA's products holding values where the store holds
// nothing of the product, in any kind.
func unstored(stored map[Cell][]ari.Day, held format.Holding, codes format.Codes) []format.HeldCell {
	known := map[[2]string]bool{}
	for cell := range stored {
		if room, plan, err := codes.Map(cell.RoomType, cell.RatePlan); err == nil {
			known[[2]string{room, plan}] = true
		}
	}
	seen := map[[2]string]bool{}
	var out []format.HeldCell
	for hc, days := range held {
		p := [2]string{hc.RoomType, hc.RatePlan}
		if known[p] || seen[p] || !holdsAny(days) {
			continue
		}
		seen[p] = true
		out = append(out, format.HeldCell{RoomType: hc.RoomType, RatePlan: hc.RatePlan})
	}
	slices.SortFunc(out, func(a, b format.HeldCell) int {
		if a.RoomType+"\x00"+a.RatePlan < b.RoomType+"\x00"+b.RatePlan {
			return -1
		}
		return 1
	})
	return out
}

func holdsAny(days map[string]format.Values) bool {
	for _, v := range days {
		if v != (format.Values{}) {
			return true
		}
	}
	return false
}

func (c *Checker) emit(rep Report) {
	if c.Metrics == nil {
		return
	}
	var m emf.Counters
	m.Add(MetricDrift, float64(len(rep.Drifted)))
	m.Add(MetricDays, float64(rep.Days))
	m.Add(MetricReads, float64(rep.Reads))
	m.Add(MetricRepairs, float64(rep.Repairs))
	m.Add(MetricUnstored, float64(len(rep.Unstored)))
	m.Add(MetricSkipped, float64(len(rep.Skipped)))
	ns := c.Namespace
	if ns == "" {
		ns = "fleetbucket"
	}
	_ = m.Flush(c.Metrics, ns, c.now())
}

func (c *Checker) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	return ctxsleep.Sleep(ctx, d)
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// windows splits from..to into windows of at most n days.
func windows(from, to string, n int) [][2]string {
	a, _ := time.Parse(ari.DateLayout, from)
	b, _ := time.Parse(ari.DateLayout, to)
	var out [][2]string
	for d := a; !d.After(b); d = d.AddDate(0, 0, n) {
		end := d.AddDate(0, 0, n-1)
		if end.After(b) {
			end = b
		}
		out = append(out, [2]string{d.Format(ari.DateLayout), end.Format(ari.DateLayout)})
	}
	return out
}

// DefaultDays is the window a check covers when it names no last date: a
// year, the horizon channel managers keep an OTA's calendar over.
const DefaultDays = 365

// Window is the check's window from flags: from (default: now's date,
// UTC) to to (default: from + days − 1).
func Window(now time.Time, from, to string, days int) (string, string, error) {
	if from == "" {
		from = now.UTC().Format(ari.DateLayout)
	}
	a, err := time.Parse(ari.DateLayout, from)
	if err != nil {
		return "", "", fmt.Errorf("--from %q: want a date, YYYY-MM-DD", from)
	}
	if to == "" {
		if days < 1 {
			return "", "", fmt.Errorf("--days %d: want at least 1", days)
		}
		to = a.AddDate(0, 0, days-1).Format(ari.DateLayout)
	}
	b, err := time.Parse(ari.DateLayout, to)
	if err != nil || b.Before(a) {
		return "", "", fmt.Errorf("--to %q: want a date, YYYY-MM-DD, not before --from %s", to, from)
	}
	return from, to, nil
}

// ConnectionsAPI is the part of *connections.Store ConnectionOf reads.
type ConnectionsAPI interface {
	Connection(ctx context.Context, propertyID, channel string) (connections.Connection, error)
}

// ConnectionOf is the property's connection to channel: from the
// connections store when one is given, else from the file's properties.
func ConnectionOf(ctx context.Context, cfg *config.Config, store ConnectionsAPI, propertyID, channel string) (config.Property, error) {
	if store != nil {
		c, err := store.Connection(ctx, propertyID, channel)
		if err != nil {
			return config.Property{}, err
		}
		return c.Property, nil
	}
	for _, p := range cfg.Properties[propertyID] {
		if p.Channel == channel {
			return p, nil
		}
	}
	return config.Property{}, fmt.Errorf("property %q has no connection to channel %q in the connections file (pass the connections table to read it there)", propertyID, channel)
}

// Action is the "action" of the event that asks the sync function for a
// parity check (the stack's parity schedules send it).
const Action = "parity"

// Event asks the sync function to check one connection: {"action":
// "parity", "property": …, "channel": …} and the window as the CLI's
// flags give it (from, to, days; default the next DefaultDays days).
type Event struct {
	Action   string `json:"action"`
	Property string `json:"property"`
	Channel  string `json:"channel"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Days     int    `json:"days,omitempty"`
}
