package config

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/internal/strictjson"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// Kinds of ARI change, each pushed to the endpoint of the same name.
var Kinds = []string{"availability", "rates", "restrictions"}

// Config is the whole connections file.
type Config struct {
	// MaxRangeDays bounds an event's date range (inclusive), default 31.
	MaxRangeDays int                   `json:"max_range_days"`
	Channels     map[string]Channel    `json:"channels"`
	Properties   map[string][]Property `json:"properties"`
	// Linger is how long a lane collects changes before its push (a Go
	// duration, "0s" for none; default syncer.DefaultLinger): see
	// LingerFor and docs/configuration.md.
	Linger string `json:"linger,omitempty"`
	// PushTimeoutSetting is "push_timeout", the time one push may take
	// with its retries (a Go duration; default otapush.PushTimeout): see
	// PushTimeout.
	PushTimeoutSetting string `json:"push_timeout,omitempty"`

	// learn is Learn's lease set, but for its key, built by Validate.
	learn limiter.InFlight
}

// Channel is one OTA.
type Channel struct {
	// BaseURL is the API root; an endpoint's URL is BaseURL + "/" + Path.
	// It must be https://host[:port][/path], with no query, fragment,
	// user info or "." / ".." path segment; http:// only with AllowHTTP.
	BaseURL string `json:"base_url"`
	// AllowHTTP accepts an http:// base_url, which sends the credential's
	// token in clear text: for a mock OTA on the local stack, never for a
	// real one.
	AllowHTTP bool `json:"allow_http,omitempty"`
	// Format names the channel's message format (see sdk/pipeline/format):
	// "json" (the default), "opentravel", "expedia-ar", or one a Go
	// program registered with format.Register before loading the config.
	Format    string              `json:"format,omitempty"`
	Endpoints map[string]Endpoint `json:"endpoints"`
	// Credentials maps a credential id to where its secret comes from.
	Credentials map[string]Credential `json:"credentials"`
	// Read, if set, is where a parity check reads back what the OTA
	// holds (see ReadEndpoint).
	Read *ReadEndpoint `json:"read,omitempty"`
}

// Endpoint is one metered API endpoint.
type Endpoint struct {
	Path  string    `json:"path"`
	Limit LimitSpec `json:"limit"`
	// Limits, Shards and PropertyShare are optional; see EndpointLimits.
	Limits        []WindowSpec `json:"limits,omitempty"`
	Shards        *int         `json:"shards,omitempty"`
	PropertyShare *LimitSpec   `json:"property_share,omitempty"`
	// MaxItems bounds the items (room type × rate plan × date) one push
	// carries; default DefaultMaxItems. It must be at least max_range_days,
	// so that any one change fits in a push.
	MaxItems int `json:"max_items,omitempty"`
	// MaxBytes bounds one push's body; default DefaultMaxBytes.
	MaxBytes int `json:"max_bytes,omitempty"`
	// SplitBy is "month" (each calendar month in its own requests) or
	// "none"; default: the format's own (month for opentravel).
	SplitBy string `json:"split_by,omitempty"`
	// KindsPerMessage caps the change kinds one request mixes; default 1
	// (RateGain wants inventory and restrictions apart).
	KindsPerMessage int `json:"kinds_per_message,omitempty"`
	// Cost is what the vendor meters: CostRequests (the default) counts a
	// push as one token of limit; CostItems counts its items (room type ×
	// rate plan × date), each ItemWeight tokens, as Expedia Rapid counts
	// properties × rooms × nights. Then limit.rate and burst are items
	// (× weight) per second, and a push carries as many items as the
	// tokens it can book at its slot: at most burst ÷ weight, since a
	// push's items reach the vendor at one instant.
	Cost string `json:"cost,omitempty"`
	// ItemWeight is the tokens one item costs with cost "items"; default 1.
	ItemWeight float64 `json:"item_weight,omitempty"`
	// Meter names the vendor's meter the endpoint counts against, when
	// several of a channel's endpoints share one limit (Booking.com's
	// B.XML takes availability, rates and restrictions on one endpoint):
	// the endpoints of a meter share one bucket per credential, and must
	// declare the same limits. Default: the endpoint's own name.
	Meter string `json:"meter,omitempty"`
	// Priority is PriorityNormal (the default) or PriorityUrgent: which
	// kind of change must not wait behind a backlog of the others on its
	// meter (stop-sells and closeouts are availability; rates and full
	// resyncs are normal). Urgent pushes do not linger to merge changes.
	Priority string `json:"priority,omitempty"`
	// UrgentReserve is how many tokens of the burst normal pushes leave
	// free for urgent ones on this meter: normal pushes take only tokens
	// free at once, from a burst of limit.burst − urgent_reserve (a push
	// denied waits for the next free token), so urgent_reserve urgent
	// pushes find a token at once however long the normal backlog, and
	// with nothing urgent the normal ones still use the whole rate; their
	// retries take only free tokens too, and a throttle or a drain they
	// meet empties the whole burst. 0 (the default): no reserve. It needs
	// a single bucket: no shards, limits or property_share.
	UrgentReserve int `json:"urgent_reserve,omitempty"`
	// FillQuota makes the endpoint's lanes end their linger early when
	// its bucket would otherwise fill up meanwhile and lose the tokens it
	// accrues while changes wait: fresher pushes on quota that would go
	// unused, at the cost of fewer changes merged per request (more
	// requests and store calls per change). Normal endpoints on a meter
	// with an urgent_reserve always do. Default false: a linger runs its
	// course.
	FillQuota bool `json:"fill_quota,omitempty"`
	// Mode is ModeEnforce (the default) or ModeShadow. In shadow mode the
	// dispatcher still reserves from the shared bucket, so the bucket shows
	// what enforcement would do, and records whether it would have
	// deferred or shed the push and how long it would have waited; but it
	// pushes at once. It is how fleetbucket is rolled out on an
	// integration that already pushes at its own pace.
	Mode string `json:"mode,omitempty"`
	// OnStoreUnavailable is what a push does while the limiter's DynamoDB
	// table cannot be reached: StoreClosed (the default) defers it until
	// the store is back (fail closed); StoreLocalShare paces each process
	// with an equal local share of the limit (rate and burst ÷ the
	// function's maximum number of instances, see sdk/limiter/fallback) and
	// pushes, so fresh changes keep flowing and the fleet stays within
	// the limit.
	OnStoreUnavailable string `json:"on_store_unavailable,omitempty"`
	// Adaptive makes the fleet learn the vendor's real limit below Limit
	// (see AdaptiveSpec); nil keeps Limit fixed.
	Adaptive *AdaptiveSpec `json:"adaptive,omitempty"`
	// Share leases parts of the bucket's rate to execution environments
	// while it idles (see ShareSpec and LimiterShare); nil books every push.
	Share *ShareSpec `json:"share,omitempty"`
	// Throttle says how the vendor shows throttling (see ThrottleSpec);
	// nil is otapush.DefaultSignals.
	Throttle *ThrottleSpec `json:"throttle,omitempty"`
	// MaxAge bounds a push job's life, as a Go duration ("24h", "90m"):
	// a job first seen longer ago is dead-lettered as expired rather than
	// pushed or deferred again, and no slot is booked past it. Default
	// 24h (dispatch.DefaultPolicy.MaxAge).
	MaxAge string `json:"max_age,omitempty"`
	// MaxDeferrals bounds a job's trips through the deferred queue; the
	// one that would pass it dead-letters the job as expired instead.
	// Default dispatch.DefaultPolicy.MaxDeferrals.
	MaxDeferrals *int `json:"max_deferrals,omitempty"`
	// Margin is refill time the endpoint's buckets keep free for the jitter
	// between a grant and its request reaching the vendor, as a Go duration
	// ("100ms"; "0s" for none): see KeptMargin and limiter.Limit.Margin.
	Margin string `json:"margin,omitempty"`
	// MaxInFlight, LeaseHold and Quota: requests in flight at once and a
	// calendar quota (see meters.go).
	MaxInFlight *int       `json:"max_in_flight,omitempty"`
	LeaseHold   string     `json:"lease_hold,omitempty"`
	Quota       *QuotaSpec `json:"quota,omitempty"`
}

// Endpoint modes and store-unavailable behaviours.
const (
	ModeEnforce     = "enforce"
	ModeShadow      = "shadow"
	StoreClosed     = "closed"
	StoreLocalShare = "local-share"
)

// What an endpoint's limit counts.
const (
	CostRequests = "requests"
	CostItems    = "items"
)

// Endpoint priorities.
const (
	PriorityNormal = "normal"
	PriorityUrgent = "urgent"
)

// Urgent reports whether the endpoint's pushes are urgent.
func (e Endpoint) Urgent() bool { return e.Priority == PriorityUrgent }

// MeterOf is the meter endpoint name counts against on a channel: its
// "meter", or its own name.
func (ch Channel) MeterOf(name string) string {
	if m := ch.Endpoints[name].Meter; m != "" {
		return m
	}
	return name
}

// BucketKey is the key of the shared bucket a credential's pushes to a
// meter draw from: channel#credential#meter. It is the one place the key is
// spelled: the sync function, the CLI, the dashboard and the tests all
// build it here, since a key built any other way names a bucket no worker
// draws from (a penalize there stops nothing).
func BucketKey(channel, credential, meter string) string {
	return channel + "#" + credential + "#" + meter
}

// BucketKey is the key of the shared bucket a credential's pushes to
// endpoint draw from: its meter's (see MeterOf), so endpoints that share a
// meter share the bucket.
func (c *Config) BucketKey(channel, credential, endpoint string) string {
	return BucketKey(channel, credential, c.Channels[channel].MeterOf(endpoint))
}

// ItemCost is the tokens one item costs on an endpoint metered by items,
// and 0 on one metered by requests.
func (e Endpoint) ItemCost() float64 {
	switch {
	case e.Cost != CostItems:
		return 0
	case e.ItemWeight == 0:
		return 1
	}
	return e.ItemWeight
}

// Shadow reports whether the endpoint is in shadow mode.
func (e Endpoint) Shadow() bool { return e.Mode == ModeShadow }

// LocalShare reports whether the endpoint paces itself locally while the
// limiter store is unreachable.
func (e Endpoint) LocalShare() bool { return e.OnStoreUnavailable == StoreLocalShare }

// Request limits of one push, when an endpoint does not set its own.
// SiteMinder's pmsXchange takes 500 messages per request; Agoda caps a
// request at 1 MB.
const (
	DefaultMaxItems = 500
	DefaultMaxBytes = 1 << 20
	// MaxMaxBytes bounds max_bytes by the largest SQS message, so that a
	// push the vendor refuses fits a dead-letter queue raised to hold it
	// (a smaller queue gets a reference: deferral.Queue.DeadLetter).
	MaxMaxBytes = 1 << 20
)

// RequestLimits returns the endpoint's max_items and max_bytes, defaults
// applied.
func (e Endpoint) RequestLimits() (maxItems, maxBytes int) {
	maxItems, maxBytes = e.MaxItems, e.MaxBytes
	if maxItems == 0 {
		maxItems = DefaultMaxItems
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	return maxItems, maxBytes
}

// LimitSpec is a limit as written in the file.
type LimitSpec struct {
	Rate  float64 `json:"rate"`  // requests per second
	Burst int     `json:"burst"` // bucket size
}

// Credential says where a credential's API token is read from, exactly one
// of:
//
//   - secret_id: a Secrets Manager secret (name or ARN) whose SecretString
//     is the token. The function reads it at first use and caches it (see
//     sdk/pipeline/credentials); this is what a deployment uses.
//   - token_env: an environment variable holding the token, for local runs
//     and tests.
//
// The token itself never appears in the file.
type Credential struct {
	TokenEnv string `json:"token_env,omitempty"`
	SecretID string `json:"secret_id,omitempty"`
}

// SecretRefPrefix starts the Ref of a credential read from Secrets Manager.
const SecretRefPrefix = "secretsmanager:"

// Ref names where the credential's token comes from, as one string: the
// token_env name itself, or SecretRefPrefix + secret_id. It is what the
// token hooks (syncer.Syncer.Token, tokens.Cache.Token) take.
func (c Credential) Ref() string {
	if c.SecretID != "" {
		return SecretRefPrefix + c.SecretID
	}
	return c.TokenEnv
}

// Property is one connection of a property to a channel. The same record
// is a connection in the connections store (sdk/pipeline/connections),
// held to the same rules (ValidateConnections).
type Property struct {
	Channel    string `json:"channel"`
	Credential string `json:"credential"`
	// HotelRef is the property's id at the OTA.
	HotelRef string `json:"hotel_ref"`
	// Disabled stops the connection: its changes are not pushed, and what
	// its lanes had pending is dropped (uncounted as pushes or dead
	// letters) at its next push.
	Disabled bool `json:"disabled,omitempty"`
	// Kinds lists the kinds of change the connection receives; empty: every
	// kind the channel has an endpoint for.
	Kinds []string `json:"kinds,omitempty"`
	// RoomTypes and RatePlans map the PMS's codes to the OTA's ids (see
	// format.Codes): unset, codes go as they are; set, a code missing from
	// it is dead-lettered before any request.
	RoomTypes map[string]string `json:"room_types,omitempty"`
	RatePlans map[string]string `json:"rate_plans,omitempty"`
}

// Codes is the connection's code mapping.
func (p Property) Codes() format.Codes {
	return format.Codes{RoomTypes: p.RoomTypes, RatePlans: p.RatePlans}
}

// Receives reports whether the connection takes changes of kind.
func (p Property) Receives(kind string) bool {
	return !p.Disabled && (len(p.Kinds) == 0 || slices.Contains(p.Kinds, kind))
}

// Load reads and validates a connections file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("connections config: %w", err)
	}
	return Parse(b)
}

// Parse decodes and validates a connections file's contents. Besides
// Validate's checks it refuses unknown fields, a key given twice in one
// object anywhere in the file (JSON decoders keep only the last one, so
// two "bk" channels would silently become the second) or twice but for
// case where it names a field ("rate" and "Rate": the decoder matches
// fields ignoring case), and anything after the JSON value.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("connections config: %w", err)
	}
	if err := strictjson.CheckFor(b, &c); err != nil {
		return nil, fmt.Errorf("connections config: %w", err)
	}
	if c.MaxRangeDays == 0 {
		c.MaxRangeDays = 31
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// ValidateConnections checks a property's connections against the config's
// channels, each problem naming its place as in the file
// (properties.<pid>[i].field). The connections store holds what it writes
// to the same rules.
func (c *Config) ValidateConnections(pid string, conns []Property) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	at := "properties." + pid
	if pid == "" || strings.Contains(pid, "#") {
		add("%s: property ids may not be empty or contain '#'", at)
	}
	if len(conns) == 0 {
		add("%s: no connections", at)
	}
	for i, p := range conns {
		ch, ok := c.Channels[p.Channel]
		switch {
		case !ok:
			add("%s[%d].channel: unknown channel %q", at, i, p.Channel)
		case !hasKey(ch.Credentials, p.Credential):
			add("%s[%d].credential: channel %q has no credential %q", at, i, p.Channel, p.Credential)
		}
		if p.HotelRef == "" {
			add("%s[%d].hotel_ref: empty", at, i)
		}
		for _, k := range p.Kinds {
			if _, has := ch.Endpoints[k]; ok && !has {
				add("%s[%d].kinds: channel %q has no endpoint %q, want some of %s", at, i, p.Channel, k, strings.Join(sortedKeys(ch.Endpoints), ", "))
			}
		}
		for field, m := range map[string]map[string]string{"room_types": p.RoomTypes, "rate_plans": p.RatePlans} {
			for _, code := range sortedKeys(m) {
				if code == "" || m[code] == "" {
					add("%s[%d].%s: %q → %q, want a PMS code and the OTA's id, neither empty", at, i, field, code, m[code])
				}
			}
		}
	}
	return errs
}

// Target is one push destination of a property's change.
type Target struct {
	Channel    string
	Credential string
	Endpoint   string
	HotelRef   string
	// Format is the channel's message format (Channel.FormatName).
	Format string
	// Codes maps the property's codes to the channel's ids.
	Codes format.Codes
}

// Targets lists where a change of the given kind to a property is pushed:
// every enabled connection that receives the kind, on a channel with an
// endpoint for it (TargetsOf). It returns false for an unknown property.
func (c *Config) Targets(propertyID, kind string) ([]Target, bool) {
	conns, ok := c.Properties[propertyID]
	if !ok {
		return nil, false
	}
	return TargetsOf(c, conns, kind), true
}

// TargetsOf lists where a change of kind goes among a property's
// connections: those enabled that receive kind, on a channel with an
// endpoint for it.
func TargetsOf(c *Config, conns []Property, kind string) []Target {
	var ts []Target
	for _, p := range conns {
		if _, ok := c.Channels[p.Channel].Endpoints[kind]; ok && p.Receives(kind) {
			ts = append(ts, Target{Channel: p.Channel, Credential: p.Credential, Endpoint: kind, HotelRef: p.HotelRef, Format: c.Channels[p.Channel].FormatName(), Codes: p.Codes()})
		}
	}
	return ts
}

// Endpoint returns the URL and limit of a channel's endpoint.
func (c *Config) Endpoint(channel, endpoint string) (string, limiter.Limit, error) {
	ch, ok := c.Channels[channel]
	if !ok {
		return "", limiter.Limit{}, fmt.Errorf("unknown channel %q", channel)
	}
	ep, ok := ch.Endpoints[endpoint]
	if !ok {
		return "", limiter.Limit{}, fmt.Errorf("channel %q has no endpoint %q", channel, endpoint)
	}
	return ch.URL(endpoint), ep.withMargin(limiter.Limit{Rate: ep.Limit.Rate, Burst: ep.Limit.Burst}), nil
}

// URL is where the channel's endpoint is pushed: its path under the
// channel's base URL.
func (ch Channel) URL(endpoint string) string {
	return strings.TrimRight(ch.BaseURL, "/") + "/" + strings.TrimLeft(ch.Endpoints[endpoint].Path, "/")
}

// MaxConcurrency sizes the function's concurrency from the quota: enough
// invocations to keep every metered bucket busy if each push takes up to
// 200 ms, and no more, since more instances only wait for the same tokens.
// It is the sum over (credential, endpoint) of rate × 0.2 s, within [2, 1000].
func (c *Config) MaxConcurrency() int {
	total := 0.0
	for _, ch := range c.Channels {
		for _, ep := range ch.Endpoints {
			total += ep.Limit.Rate * float64(len(ch.Credentials))
		}
	}
	return min(max(int(math.Ceil(total*0.2)), 2), 1000)
}
