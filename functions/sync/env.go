package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/emf"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/credentials"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// settings is the function's environment, checked in full at init.
type settings struct {
	table, stateTable       string
	deferredURL, deadURL    string
	connectionsPath         string
	namespace               string
	storeFailures, cooldown int
	// maxReceives is the deferred queue's maxReceiveCount
	// (FLEETBUCKET_MAX_RECEIVE_COUNT): syncer.Syncer.MaxReceives.
	maxReceives int
	// maxConcurrency is the event sources' cap when the stack overrode the
	// config's (FLEETBUCKET_MAX_CONCURRENCY); 0: the config's.
	maxConcurrency int
	// connectionsTable, if set, is where properties' connections are
	// read (through a cache), instead of the file's properties.
	connectionsTable string
}

func readSettings(getenv func(string) string) (settings, error) {
	s := settings{
		table:           getenv(contract.EnvLimiterTable),
		stateTable:      getenv(contract.EnvStateTable),
		deferredURL:     getenv(contract.EnvDeferredQueueURL),
		deadURL:         getenv(contract.EnvDLQURL),
		connectionsPath: getenv(contract.EnvConnections),
		namespace:       getenv(contract.EnvMetricsNamespace),
		storeFailures:   3,
		cooldown:        10,
	}
	s.connectionsTable = getenv(contract.EnvConnectionsTable)
	var missing []string
	for name, v := range map[string]string{
		contract.EnvLimiterTable: s.table, contract.EnvStateTable: s.stateTable,
		contract.EnvDeferredQueueURL: s.deferredURL, contract.EnvDLQURL: s.deadURL,
		contract.EnvMaxReceiveCount: getenv(contract.EnvMaxReceiveCount),
	} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return s, fmt.Errorf("missing environment: %s (the CDK stack sets them)", strings.Join(sorted(missing), ", "))
	}
	if s.connectionsPath == "" {
		s.connectionsPath = contract.ConnectionsFile
	}
	if !filepath.IsAbs(s.connectionsPath) {
		// The asset is unpacked in LAMBDA_TASK_ROOT; locally, beside the binary.
		root := getenv("LAMBDA_TASK_ROOT")
		if root == "" {
			exe, _ := os.Executable()
			root = filepath.Dir(exe)
		}
		s.connectionsPath = filepath.Join(root, s.connectionsPath)
	}
	if s.namespace == "" {
		s.namespace = contract.MetricsNamespace
	}
	n, err := strconv.Atoi(getenv(contract.EnvMaxReceiveCount))
	if err != nil || n < 2 {
		// 1 would hand every deferred job's lane to the sweep on its first
		// receive.
		return s, fmt.Errorf("%s is %q, want the deferred queue's maxReceiveCount, at least 2 (the stack sets it from its redrive policy)",
			contract.EnvMaxReceiveCount, getenv(contract.EnvMaxReceiveCount))
	}
	s.maxReceives = n
	if v := getenv(contract.EnvMaxConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("%s is %q, want a positive integer (the event sources' maximum concurrency)", contract.EnvMaxConcurrency, v)
		}
		s.maxConcurrency = n
	}
	return s, nil
}

// newHandler builds everything the function needs and refuses to start on
// any bad setting: the config is loaded and validated, and every token_env
// credential's variable must be set. Credentials with a secret_id are read
// from Secrets Manager at first use (and cached, see sdk/pipeline/credentials), so that
// no token sits in the function's environment.
func newHandler(ctx context.Context, getenv func(string) string, log *slog.Logger) (*handler, error) {
	s, err := readSettings(getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(s.connectionsPath)
	if err != nil {
		return nil, err
	}
	if err := tokensPresent(cfg, getenv); err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config: %w", err)
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	db := dynamodb.NewFromConfig(awsCfg)
	opts := []pipeline.Option{
		pipeline.WithLogger(log),
		pipeline.WithLimiterOptions(limiter.WithCircuitBreaker(s.storeFailures, time.Duration(s.cooldown)*time.Second)),
		pipeline.WithCredentialOptions(credentials.WithGetenv(getenv)),
		pipeline.WithLocalShare(maxInstances(cfg, s.maxConcurrency)),
		pipeline.WithSyncer(func(sy *syncer.Syncer) { sy.MaxReceives = s.maxReceives }),
	}
	var conns parity.ConnectionsAPI
	if s.connectionsTable != "" {
		store := &connections.Store{DB: db, Table: s.connectionsTable, Config: cfg}
		conns = store
		cache := &connections.Cache{Source: store, Config: cfg}
		opts = append(opts, pipeline.WithSyncer(func(sy *syncer.Syncer) { sy.Connections = cache }))
	}
	p, err := pipeline.New(cfg,
		// The pushes' HTTP client is the pipeline's: it times out at the
		// config's push_timeout, the one figure a push runs under.
		pipeline.Clients{DynamoDB: db, SQS: sqsClient, Secrets: secretsmanager.NewFromConfig(awsCfg)},
		pipeline.Names{LimiterTable: s.table, StateTable: s.stateTable, DeferredURL: s.deferredURL, DeadURL: s.deadURL},
		opts...)
	if err != nil {
		return nil, err
	}
	sy, secrets := p.Syncer, p.Credentials
	checker := &parity.Checker{Config: cfg, State: sy.State, Limiter: p.Limiter, Secret: secrets.Token,
		Repair: parity.SyncerRepairer{Syncer: sy}, Metrics: os.Stdout, Namespace: s.namespace}
	return &handler{syncer: sy, tokens: secrets, deferredQueue: queueName(s.deferredURL), log: log, metrics: &emf.Counters{},
		namespace: s.namespace, out: os.Stdout, queues: newChangeQueues(sqsClient), parity: checker, conns: conns}, nil
}

// maxInstances bounds how many processes of the function run at once, the
// N a local share divides each limit by: the function has two SQS event
// sources (changes and deferred, infra/stack's EventSources), each capped
// at the stack's maxConcurrency, so at most 2 × maxConcurrency instances
// handle jobs. maxConcurrency is config.Config.MaxConcurrency() unless
// the stack overrode it (CDK context maxConcurrency), in which case it
// passes the value in FLEETBUCKET_MAX_CONCURRENCY. An N too small would let
// the fleet exceed the limit during an outage; one too large only paces it
// more slowly.
func maxInstances(cfg *config.Config, override int) int {
	const eventSources = 2
	if override > 0 {
		return eventSources * override
	}
	return eventSources * cfg.MaxConcurrency()
}

// tokensPresent checks the token_env credentials' variables; secret_id
// ones are read at first use.
func tokensPresent(cfg *config.Config, getenv func(string) string) error {
	var missing []string
	for name, ch := range cfg.Channels {
		for id, cred := range ch.Credentials {
			if cred.SecretID == "" && getenv(cred.TokenEnv) == "" {
				missing = append(missing, fmt.Sprintf("%s (channel %s, credential %s)", cred.TokenEnv, name, id))
			}
		}
	}
	if len(missing) > 0 {
		return errors.New("credential tokens not set: " + strings.Join(sorted(missing), ", "))
	}
	return nil
}

// queueName is the last path segment of a queue URL, which is also the
// last segment of its ARN.
func queueName(url string) string { return url[strings.LastIndex(url, "/")+1:] }
