package syncer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A job's route: where and under which limit it is pushed, resolved once
// per job against the connections config (the syncer's resolve), with its
// credential's token read last.

// Route resolves a job against the connections config, reading the
// property of a per-property share from its payload (a lane job's).
func (s *Syncer) Route(j job.Job) (dispatch.Route, error) {
	var ref laneRef
	if err := json.Unmarshal(j.Payload, &ref); err != nil {
		ref = laneRef{}
	}
	route, _, err := s.route(j, ref.PropertyID)
	return route, err
}

// Needs is what the routes of s's config ask of a dispatcher (see
// Route): the dispatcher built for s checks it has each capability they
// use before its first job (dispatch.Dispatcher.Validate).
func (s *Syncer) Needs() dispatch.Needs {
	var n dispatch.Needs
	for channel, ch := range s.Config.Channels {
		for name, ep := range ch.Endpoints {
			limits, err := s.Config.Limits(channel, name)
			if err != nil {
				continue // Route refuses it, job by job
			}
			n = n.Or(dispatch.Needs{Sharded: limits.Shards > 1, Multi: len(limits.Extra) > 0 || limits.PropertyShare != nil,
				Items: ep.ItemCost() > 0, Adaptive: limits.Adaptive != nil, LocalShare: ep.LocalShare(),
				Quota: ep.Quota != nil, InFlight: ep.MaxInFlight != nil})
		}
	}
	return n
}

// route resolves j against the connections config; property is the one
// its payload names (a lane job's), for an endpoint with a per-property
// share.
func (s *Syncer) route(j job.Job, property string) (dispatch.Route, *encoding, error) {
	// Limits refuses an unknown channel or endpoint; what else the route
	// needs of them is read off them here, once.
	limits, err := s.Config.Limits(j.Channel, j.Endpoint)
	if err != nil {
		return dispatch.Route{}, nil, err
	}
	if limits.PropertyShare != nil && property == "" {
		return dispatch.Route{}, nil, fmt.Errorf("job %q names no property, and endpoint %q has a per-property share", j.ID, j.Endpoint)
	}
	ch := s.Config.Channels[j.Channel]
	url := ch.URL(j.Endpoint)
	key := config.BucketKey(j.Channel, j.Credential, ch.MeterOf(j.Endpoint))
	buckets := limits.Buckets(key, property)
	cred, ok := ch.Credentials[j.Credential]
	if !ok {
		return dispatch.Route{}, nil, fmt.Errorf("channel %q has no credential %q", j.Channel, j.Credential)
	}
	var sharded *limiter.ShardedBucket
	if limits.Shards > 1 {
		// The config refuses shards together with extra windows or shares.
		s := limits.Sharded(key)
		sharded = &s
	}
	ep := ch.Endpoints[j.Endpoint]
	maxAge, maxDeferrals := ep.Lifetime()
	var horizon time.Duration
	reserve := 0
	if r := ep.UrgentReserve; r > 0 && !ep.Urgent() {
		// Normal pushes take only tokens free now, from all but r of the
		// burst, their retries too: the bucket's tat never runs ahead of
		// now by more than burst − r tokens, so r urgent pushes find a
		// token at once however long the normal backlog. The config
		// allows a reserve only on a single bucket.
		buckets[0].Limit.Burst -= r
		horizon, reserve = time.Millisecond, r
	}
	if limits.PropertyShare != nil {
		// A reservation charges every bucket at its common slot (the
		// vendor counts the credential's window at arrival): a property
		// past its share booking ahead would charge the credential there,
		// and hold every other property back until then. It takes only
		// tokens free now, and is deferred without a slot until its share
		// has one.
		horizon = time.Millisecond
	}
	push := s.Config.PushTimeout()
	route := dispatch.Route{
		Bucket:     buckets[0],
		Also:       buckets[1:],
		Sharded:    sharded,
		URL:        url,
		Shadow:     ep.Shadow(),
		LocalShare: ep.LocalShare(),
		ItemWeight: ep.ItemCost(),
		Horizon:    horizon,
		Reserve:    reserve,
		// Zero where the file sets none: the dispatcher's defaults.
		MaxAge:       maxAge,
		MaxDeferrals: maxDeferrals,
		InFlight:     ep.InFlight(key, push),
		Learn:        s.Config.Learn(key),
	}
	if route.Quota, err = ep.CalendarQuota(key); err != nil {
		return dispatch.Route{}, nil, err
	}
	// The token is read last, so that a job whose token cannot be read
	// now is deferred under its route's lifetime bounds.
	token, err := s.credential(cred.Ref())
	var unreadable *dispatch.RouteUnavailableError
	if errors.As(err, &unreadable) {
		unreadable.Route, unreadable.Err = route, fmt.Errorf("credential %q: %w", j.Credential, unreadable.Err)
		return route, nil, unreadable
	}
	if err != nil {
		return dispatch.Route{}, nil, fmt.Errorf("credential %q: %w", j.Credential, err)
	}
	// The push encodes with what is resolved here (a format it cannot
	// find fails the push, which reads the config again for the error).
	f, shape, err := ch.Encoding(j.Endpoint)
	if err != nil {
		return route, nil, nil
	}
	if f.Traits().Credential == format.CredentialToken {
		route.Header = http.Header{"Authorization": {"Bearer " + token}}
	}
	return route, &encoding{format: f, shape: shape}, nil
}

// RefreshCredential drops the job's cached credential token and reports
// whether the push should go out again: a new token replaced it (a
// rotation), or the token cannot be read now, in which case the job's
// route defers it until it can (Route). Every task carries it
// (dispatch.Task.Refresh), so a push refused with 401/403 is retried
// rather than dead-lettered with what it carried.
func (s *Syncer) RefreshCredential(j job.Job) bool {
	cred, ok := s.Config.Channels[j.Channel].Credentials[j.Credential]
	if !ok || s.Invalidate == nil {
		return false
	}
	ref := cred.Ref()
	before, _ := s.credential(ref)
	s.Invalidate(ref)
	after, err := s.credential(ref)
	var unreadable *dispatch.RouteUnavailableError
	if errors.As(err, &unreadable) {
		return true
	}
	return err == nil && after != before
}

// credential reads the token ref names. A *dispatch.RouteUnavailableError
// (without its route) is a token that cannot be read now; any other error
// one that is not set.
func (s *Syncer) credential(ref string) (string, error) {
	if s.Credential != nil {
		tok, err := s.Credential(ref)
		if err == nil && tok == "" {
			err = fmt.Errorf("%s holds an empty token", ref)
		}
		if err != nil {
			return "", &dispatch.RouteUnavailableError{Err: err}
		}
		return tok, nil
	}
	tok := os.Getenv(ref)
	if s.Token != nil {
		tok = s.Token(ref)
	}
	if tok == "" {
		return "", fmt.Errorf("%s is not set", ref)
	}
	return tok, nil
}
