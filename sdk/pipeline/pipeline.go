package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/credentials"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// DynamoDBAPI is what the pipeline asks of DynamoDB: the limiter's
// buckets, the ARI state and the lanes (*dynamodb.Client is one).
type DynamoDBAPI interface {
	limiter.DynamoDBAPI
	ari.DynamoDBAPI
	lane.DynamoDBAPI
}

// Clients are the clients a pipeline talks through.
type Clients struct {
	DynamoDB DynamoDBAPI  // required
	SQS      queue.SQSAPI // required: the deferred and dead-letter queues
	// Secrets reads the tokens of credentials with a secret_id; required
	// when the config has one, unless WithToken supplies every token.
	Secrets credentials.SecretsManagerAPI
	// HTTP sends the pushes; nil: a client whose timeout is the config's
	// push_timeout (config.Config.PushTimeout). A client of your own
	// should time out no sooner.
	HTTP *http.Client
}

// Names are where the pipeline keeps its state.
type Names struct {
	LimiterTable, StateTable string // DynamoDB tables
	DeferredURL, DeadURL     string // SQS queue URLs
}

// Pipeline is one worker's pipeline: the Syncer handles both of the sync
// function's queues and hands each job, resolved into a task (its route
// and its lane's work), to the Dispatcher, which pushes it or defers it
// and hands back a result. Calls go one way: the Dispatcher holds nothing
// of the Syncer.
type Pipeline struct {
	Syncer     *syncer.Syncer
	Dispatcher *dispatch.Dispatcher
	Limiter    *limiter.Limiter
	Pusher     *otapush.Client
	// Credentials caches the tokens read from Secrets Manager; nil
	// without Clients.Secrets.
	Credentials *credentials.Cache
}

// TokenReadTimeout bounds one Secrets Manager read of a credential's token.
const TokenReadTimeout = 5 * time.Second

// Option sets what New builds differently from its defaults.
type Option func(*options)

type options struct {
	log          *slog.Logger
	policy       dispatch.Policy
	now          func() time.Time
	limiterOpts  []limiter.Option
	pushOpts     []otapush.Option
	credOpts     []credentials.Option
	token        func(env string) string
	localShare   int
	tuneSyncer   []func(*syncer.Syncer)
	tuneDispatch []func(*dispatch.Dispatcher)
}

// WithLogger logs the dispatcher's and the pushes' warnings to l; default
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithPolicy sets the dispatcher's thresholds; default dispatch.DefaultPolicy.
func WithPolicy(p dispatch.Policy) Option { return func(o *options) { o.policy = p } }

// WithClock makes the limiter, the pushes, the dispatcher and the queue
// read now (tests); the syncer's own clock is set with WithSyncer.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLimiterOptions adds options to the limiter (e.g.
// limiter.WithCircuitBreaker); its table is Names.LimiterTable.
func WithLimiterOptions(opts ...limiter.Option) Option {
	return func(o *options) { o.limiterOpts = append(o.limiterOpts, opts...) }
}

// WithPushOptions adds options to the push client.
func WithPushOptions(opts ...otapush.Option) Option {
	return func(o *options) { o.pushOpts = append(o.pushOpts, opts...) }
}

// WithCredentialOptions adds options to the credentials cache (e.g.
// credentials.WithGetenv).
func WithCredentialOptions(opts ...credentials.Option) Option {
	return func(o *options) { o.credOpts = append(o.credOpts, opts...) }
}

// WithToken reads every credential's token with token (given its
// token_env) instead of from the environment or Secrets Manager.
func WithToken(token func(env string) string) Option { return func(o *options) { o.token = token } }

// WithLocalShare lets routes with "on_store_unavailable": "local-share"
// push within this process's share of each limit while the limiter store
// is down, the limit divided by maxInstances (fallback.New): the most
// processes the fleet runs at once.
func WithLocalShare(maxInstances int) Option { return func(o *options) { o.localShare = maxInstances } }

// WithSyncer and WithDispatcher change the syncer or the dispatcher New
// built (a linger, a wrapped limiter) before it validates them.
func WithSyncer(f func(*syncer.Syncer)) Option {
	return func(o *options) { o.tuneSyncer = append(o.tuneSyncer, f) }
}

// WithDispatcher: see WithSyncer.
func WithDispatcher(f func(*dispatch.Dispatcher)) Option {
	return func(o *options) { o.tuneDispatch = append(o.tuneDispatch, f) }
}

// New builds a worker's pipeline for cfg: the limiter on
// Names.LimiterTable, the push client, the syncer on Names.StateTable and
// the dispatcher on the two queues, which the syncer hands its jobs, and
// validates them. It refuses what would fail at the first job: a missing
// client or name, a secret_id credential with no Secrets client, a route
// that needs a capability the dispatcher lacks.
func New(cfg *config.Config, c Clients, n Names, opts ...Option) (*Pipeline, error) {
	o := options{log: slog.Default(), policy: dispatch.DefaultPolicy}
	for _, opt := range opts {
		opt(&o)
	}
	if err := check(cfg, c, n, o); err != nil {
		return nil, err
	}
	limOpts := []limiter.Option{limiter.WithTable(n.LimiterTable)}
	pushOpts := []otapush.Option{otapush.WithLogger(o.log), otapush.WithSignals(cfg.Signals)}
	if o.now != nil {
		limOpts, pushOpts = append(limOpts, limiter.WithClock(o.now)), append(pushOpts, otapush.WithClock(o.now))
	}
	lim, err := limiter.New(c.DynamoDB, append(limOpts, o.limiterOpts...)...)
	if err != nil {
		return nil, err
	}
	// Leases cap the requests in flight of routes with max_in_flight; a
	// vendor's published concurrency lowers the cap (never raises it).
	leases := dispatch.NewLeases(limiter.NewLeaseGate(lim))
	pushOpts = append(pushOpts, otapush.WithConcurrency(leases.Publish))
	// One figure bounds a push: its budget, its HTTP client's timeout and
	// (config.Endpoint.InFlight) its lease's.
	policy := otapush.DefaultPolicy
	policy.MaxElapsed = cfg.PushTimeout()
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: policy.MaxElapsed}
	}
	push, err := otapush.New(hc, lim, policy, append(pushOpts, o.pushOpts...)...)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{Limiter: lim, Pusher: push}
	p.Syncer = &syncer.Syncer{Config: cfg, State: &ari.Store{DB: c.DynamoDB, Table: n.StateTable}, Lanes: &lane.Store{DB: c.DynamoDB, Table: n.StateTable},
		Token: o.token}
	switch linger, err := cfg.LingerFor(); {
	case err != nil:
		return nil, err
	case linger == 0:
		p.Syncer.Linger = -1 // none
	case linger > 0:
		p.Syncer.Linger = linger
	}
	if c.Secrets != nil && o.token == nil {
		p.Credentials = credentials.New(c.Secrets, o.credOpts...)
		p.Syncer.Credential = p.Credentials.Lookup(TokenReadTimeout, func(ref string, err error) {
			// The error names the variable or secret, never a token.
			o.log.Error("credential token unavailable; the job is deferred and retried", "token_ref", ref, "err", err)
		})
		p.Syncer.Invalidate = p.Credentials.Invalidate
	}
	p.Dispatcher = &dispatch.Dispatcher{Limiter: lim, Pusher: push, Policy: o.policy, Log: o.log, Now: o.now, Leases: leases,
		Queue: &queue.Queue{SQS: c.SQS, DeferredURL: n.DeferredURL, DeadURL: n.DeadURL, Now: o.now}}
	if o.localShare > 0 {
		p.Dispatcher.LocalShare = fallback.New(o.localShare)
	}
	for _, f := range o.tuneSyncer {
		f(p.Syncer)
	}
	for _, f := range o.tuneDispatch {
		f(p.Dispatcher)
	}
	// The routes of the config ask what they ask of the dispatcher; its
	// capabilities are read from its parts as tuned.
	p.Syncer.Dispatcher = p.Dispatcher
	p.Dispatcher.Can = dispatch.CapabilitiesOf(p.Dispatcher.Limiter)
	p.Dispatcher.Needs = p.Dispatcher.Needs.Or(p.Syncer.Needs())
	if err := p.Dispatcher.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// check refuses what New cannot build, every problem at once.
func check(cfg *config.Config, c Clients, n Names, o options) error {
	var errs []string
	add := func(bad bool, what string) {
		if bad {
			errs = append(errs, what)
		}
	}
	add(cfg == nil, "a config (config.Load)")
	add(c.DynamoDB == nil, "Clients.DynamoDB")
	add(c.SQS == nil, "Clients.SQS")
	add(n.LimiterTable == "" || n.StateTable == "", "Names.LimiterTable and Names.StateTable")
	add(n.DeferredURL == "" || n.DeadURL == "", "Names.DeferredURL and Names.DeadURL")
	if cfg != nil && c.Secrets == nil && o.token == nil {
		var secret []string
		for name, ch := range cfg.Channels {
			for id, cred := range ch.Credentials {
				if cred.SecretID != "" {
					secret = append(secret, fmt.Sprintf("%s/%s", name, id))
				}
			}
		}
		sort.Strings(secret)
		add(len(secret) > 0, "Clients.Secrets, to read the secret_id of credentials "+strings.Join(secret, ", "))
	}
	if len(errs) > 0 {
		return errors.New("pipeline: New needs " + strings.Join(errs, "; "))
	}
	return nil
}
