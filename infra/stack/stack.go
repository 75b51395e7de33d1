// Package stack defines fleetbucket's sync pipeline as an AWS CDK stack:
//
//	PMS ──► EventBridge bus (source "pms") ──► SQS changes queue ──┐
//	                                                                ├──► Lambda sync ──► OTAs
//	                         SQS deferred queue (delayed jobs) ─────┤      │
//	          EventBridge schedule (sweep, every 5 min) ────────────┘      ├─ DynamoDB limiter table (one item per bucket)
//	                                                                       ├─ DynamoDB ARI state table
//	                                                                       └─ SQS dead-letter queue (rejected jobs)
//
// It is a pure definition: it builds nothing and reads only the asset
// directory it is given (see [Props.AssetDir]). The CDK app in infra/app
// builds the function binary and passes the directory in.
package stack

import (
	"encoding/json"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// The contract with functions/sync: the environment variables it reads and
// the files of its asset directory.
const (
	EnvLimiterTable     = contract.EnvLimiterTable
	EnvStateTable       = contract.EnvStateTable
	EnvDeferredQueueURL = contract.EnvDeferredQueueURL
	EnvDLQURL           = contract.EnvDLQURL
	EnvMaxReceiveCount  = contract.EnvMaxReceiveCount
	EnvConnections      = contract.EnvConnections
	EnvConnectionsTable = contract.EnvConnectionsTable
	EnvMetricsNamespace = contract.EnvMetricsNamespace

	// BootstrapFile is the function binary inside the asset directory
	// (runtime provided.al2023, handler "bootstrap").
	BootstrapFile = contract.BootstrapFile
	// ConnectionsFile is the connections config inside the asset directory;
	// the function finds it at this path relative to its working directory
	// (the asset root, /var/task) through EnvConnections.
	ConnectionsFile = contract.ConnectionsFile

	// MetricsNamespace is the CloudWatch namespace of the function's EMF metrics.
	MetricsNamespace = contract.MetricsNamespace
	// MetricVendorThrottles counts OTA 429s / throttling answers.
	MetricVendorThrottles = contract.MetricVendorThrottles
	// MetricLimiterStoreErrors counts failed limiter calls to DynamoDB.
	MetricLimiterStoreErrors = contract.MetricLimiterStoreErrors

	// PMSSource is the EventBridge "source" of PMS change events.
	PMSSource = "pms"
	// DefaultBusName is the custom event bus's name unless Props.BusName is set.
	DefaultBusName = "fleetbucket-pms"

	// DefaultFunctionTimeout is the sync function's timeout unless
	// Props.FunctionTimeout is set; the consumed queues' visibility timeout
	// is VisibilityFactor times it.
	DefaultFunctionTimeout = 60 * time.Second
	VisibilityFactor       = 6
	// MaxReceiveCount is how often a message is received before SQS moves
	// it to the dead-letter queue.
	MaxReceiveCount = 5
	// The changes queue's batches are sdk/pipeline/syncer's ChangesBatchSize and
	// ChangesBatchingWindow: a batch's changes of one property and kind
	// mark their lanes with one write.
	ChangesBatchSize      = syncer.ChangesBatchSize
	ChangesBatchingWindow = syncer.ChangesBatchingWindow
	// DeferredBatchSize is the deferred queue's batch size; it has no
	// batching window, since its jobs come back at their slots.
	DeferredBatchSize = 10

	// Bounds of an SQS event source mapping's maximum concurrency.
	MinMaxConcurrency = 2
	MaxMaxConcurrency = 1000

	// EventSources is the number of SQS event sources of the function
	// (changes and deferred), each capped at Props.MaxConcurrency.
	EventSources = 2
	// NoReservedConcurrency as Props.ReservedConcurrency leaves the
	// function without reserved concurrency.
	NoReservedConcurrency = -1
)

// ReservedConcurrencyFor is the sync function's reserved concurrency for
// event sources capped at maxConcurrency each: both at their cap
// (EventSources × maxConcurrency) plus a headroom of 10 %, at least 2, for
// invocations outside the event sources (an operator's test invoke) and
// for the moment Lambda still counts an instance whose batch has just
// ended. The reservation keeps other functions of the account from
// throttling this one, which would hand messages back to SQS and spend
// their receive counts towards the dead-letter queue; the event sources'
// caps keep the function from throttling itself.
func ReservedConcurrencyFor(maxConcurrency int) int {
	sources := EventSources * maxConcurrency
	return sources + max(2, (sources+9)/10)
}

// Props configures the sync stack.
type Props struct {
	awscdk.StackProps

	// AssetDir is the directory deployed as the function's code: it must
	// hold BootstrapFile (a linux/arm64 binary) and ConnectionsFile.
	// A relative path is taken relative to the working directory.
	AssetDir string
	// MaxConcurrency caps each of the two SQS event sources (changes and
	// deferred), in [MinMaxConcurrency, MaxMaxConcurrency].
	MaxConcurrency int

	// BusName is the custom event bus's name; default DefaultBusName.
	BusName string
	// FunctionTimeout defaults to DefaultFunctionTimeout; whole seconds, at most 900 s.
	FunctionTimeout time.Duration
	// MemoryMiB is the function's memory; default 256.
	MemoryMiB int
	// LogRetention is the function log group's retention; default one month.
	LogRetention awslogs.RetentionDays

	// ReservedConcurrency is the function's reserved concurrency: 0 means
	// ReservedConcurrencyFor(MaxConcurrency); NoReservedConcurrency leaves
	// the function unreserved (it then shares the account's pool, and an
	// account-wide throttle costs messages receive counts); any other
	// value must be at least EventSources × MaxConcurrency, so the event
	// sources at their caps never throttle themselves.
	ReservedConcurrency int

	// Alarms are the alarms' thresholds and where they page; see Alarms.
	Alarms Alarms

	// LimiterCapacity and StateCapacity put the limiter and the ARI state
	// table on provisioned capacity with auto scaling; nil (the default)
	// keeps a table on demand. See Capacity for when it pays.
	LimiterCapacity, StateCapacity *Capacity

	// Quotas are the connections config's (credential, endpoint) limits,
	// one per bucket the function draws from: the dashboard shows each
	// bucket's pushes against its rate. Optional.
	Quotas []Quota

	// TokenSecretIDs are the Secrets Manager secrets (names or full ARNs)
	// of the connections config's credentials (secret_id). The function
	// reads them at run time (sdk/pipeline/credentials), so no token is in its
	// environment or the template; its role may GetSecretValue on exactly
	// these. A name is granted as arn:…:secret:<name>-?????? (Secrets
	// Manager appends six random characters to a secret's ARN).
	TokenSecretIDs []string

	// ParityChecks are parity checks run on a schedule (ParityCheck);
	// none by default. The channel must have a "read" endpoint.
	ParityChecks []ParityCheck
}

// SyncStack is the stack and the resources other code may want to refer to.
type SyncStack struct {
	awscdk.Stack

	LimiterTable    awsdynamodb.Table
	StateTable      awsdynamodb.Table
	Bus             awsevents.EventBus
	Rule            awsevents.Rule
	SweepRule       awsevents.Rule   // {"action": "sweep"} to the function every syncer.SweepInterval
	ParityRules     []awsevents.Rule // one per Props.ParityChecks
	ChangesQueue    awssqs.Queue
	DeferredQueue   awssqs.Queue
	DeadLetterQueue awssqs.Queue
	Function        awslambda.Function
	LogGroup        awslogs.LogGroup
	Role            awsiam.Role
	// ConnectionsTable holds the properties' connections and code
	// mappings (sdk/pipeline/connections), written by the CLI.
	ConnectionsTable awsdynamodb.Table
	// ReservedConcurrency is the function's reserved concurrency, 0 when
	// it has none.
	ReservedConcurrency int
	// AlarmTopic is the SNS topic every alarm notifies (alarm and OK):
	// the imported Alarms.TopicArn, or a topic of this stack.
	AlarmTopic awssns.ITopic
	Alarms     []awscloudwatch.Alarm
	// BucketMetricFilters turn the function's "push job" log lines into
	// per-bucket metrics (BucketMetricsNamespace, dimension Bucket).
	BucketMetricFilters []awslogs.MetricFilter
	Dashboard           awscloudwatch.Dashboard
}

func (p *Props) validate() error {
	if p.AssetDir == "" {
		return fmt.Errorf("stack: AssetDir is empty (a directory holding %s and %s)", BootstrapFile, ConnectionsFile)
	}
	for _, name := range []string{BootstrapFile, ConnectionsFile} {
		fi, err := os.Stat(filepath.Join(p.AssetDir, name))
		if err != nil {
			return fmt.Errorf("stack: asset directory %s: %w", p.AssetDir, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("stack: asset directory %s: %s is not a regular file", p.AssetDir, name)
		}
	}
	if p.MaxConcurrency < MinMaxConcurrency || p.MaxConcurrency > MaxMaxConcurrency {
		return fmt.Errorf("stack: MaxConcurrency %d is outside [%d, %d] (the SQS event source's limits)",
			p.MaxConcurrency, MinMaxConcurrency, MaxMaxConcurrency)
	}
	if p.FunctionTimeout < 0 || p.FunctionTimeout > 900*time.Second || p.FunctionTimeout%time.Second != 0 {
		return fmt.Errorf("stack: FunctionTimeout %v must be whole seconds in [1s, 900s]", p.FunctionTimeout)
	}
	if err := p.leaseOutlastsAnInvocation(); err != nil {
		return err
	}
	if p.MemoryMiB != 0 && (p.MemoryMiB < 128 || p.MemoryMiB > 10240) {
		return fmt.Errorf("stack: MemoryMiB %d is outside [128, 10240]", p.MemoryMiB)
	}
	if r := p.ReservedConcurrency; r != 0 && r != NoReservedConcurrency && r < EventSources*p.MaxConcurrency {
		return fmt.Errorf("stack: ReservedConcurrency %d is below the event sources' caps (%d × MaxConcurrency %d = %d): the function would throttle its own event sources, and throttled messages spend receive counts towards the dead-letter queue; raise it or lower MaxConcurrency",
			r, EventSources, p.MaxConcurrency, EventSources*p.MaxConcurrency)
	}
	if err := p.Alarms.validate(); err != nil {
		return err
	}
	if err := validateParity(p.ParityChecks); err != nil {
		return err
	}
	if err := p.LimiterCapacity.validate("LimiterCapacity"); err != nil {
		return err
	}
	if err := p.StateCapacity.validate("StateCapacity"); err != nil {
		return err
	}
	for _, q := range p.Quotas {
		if err := q.validate(); err != nil {
			return err
		}
	}
	for _, id := range p.TokenSecretIDs {
		if strings.TrimSpace(id) != id || id == "" || strings.ContainsAny(id, "{}*?") {
			return fmt.Errorf("stack: TokenSecretIDs: invalid secret id %q (a name or ARN, no wildcards)", id)
		}
		if strings.HasPrefix(id, "arn:") && !strings.Contains(id, ":secretsmanager:") {
			return fmt.Errorf("stack: TokenSecretIDs: %q is not a Secrets Manager ARN", id)
		}
	}
	return nil
}

// leaseOutlastsAnInvocation refuses a function timeout that, with the
// config's push_timeout, reaches the lane lease (lane.DefaultLease, which
// the function uses): an invocation holds the lanes it marked, and pushes
// them without a claim, for as long as it runs, and a push begun at its
// end takes push_timeout more. A lease that ran out before would let the
// next change or the sweep take the lane over and push it a second time,
// concurrently. Only push_timeout is read here; the function checks the
// rest of the config at start-up.
func (p *Props) leaseOutlastsAnInvocation() error {
	path := filepath.Join(p.AssetDir, ConnectionsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("stack: asset directory %s: %w", p.AssetDir, err)
	}
	var cfg config.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("stack: %s: %w", path, err)
	}
	timeout := p.FunctionTimeout
	if timeout == 0 {
		timeout = DefaultFunctionTimeout
	}
	if push := cfg.PushTimeout(); timeout+push >= lane.DefaultLease {
		return fmt.Errorf("stack: FunctionTimeout %v + push_timeout %v (%s) = %v is not below the lane lease %v (lane.DefaultLease): a lane would outlive its lease in one invocation and be pushed twice; lower FunctionTimeout below %v or push_timeout",
			timeout, push, path, timeout+push, lane.DefaultLease, lane.DefaultLease-push)
	}
	return nil
}

// NewSyncStack defines the stack in scope. It returns an error, and defines
// nothing, when props are invalid or the asset directory is incomplete.
func NewSyncStack(scope constructs.Construct, id string, props *Props) (*SyncStack, error) {
	if props == nil {
		props = &Props{}
	}
	p := *props
	if err := p.validate(); err != nil {
		return nil, err
	}
	if p.BusName == "" {
		p.BusName = DefaultBusName
	}
	if p.FunctionTimeout == 0 {
		p.FunctionTimeout = DefaultFunctionTimeout
	}
	if p.MemoryMiB == 0 {
		p.MemoryMiB = 256
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if p.Description == nil {
		p.Description = jsii.String("fleetbucket sync pipeline: PMS events -> SQS -> Lambda sync, one DynamoDB token bucket per (credential, endpoint)")
	}

	p.Alarms = p.Alarms.withDefaults()
	switch p.ReservedConcurrency {
	case 0:
		p.ReservedConcurrency = ReservedConcurrencyFor(p.MaxConcurrency)
	case NoReservedConcurrency:
		p.ReservedConcurrency = 0
	}

	stack := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	s := &SyncStack{Stack: stack, ReservedConcurrency: p.ReservedConcurrency}
	timeoutSeconds := p.FunctionTimeout.Seconds()

	// ---------------------------------------------------------- tables ----

	limiterProps := &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(limiter.KeyAttribute), Type: awsdynamodb.AttributeType_STRING},
		TimeToLiveAttribute: jsii.String(limiter.TTLAttribute),
		RemovalPolicy:       awscdk.RemovalPolicy_RETAIN,
	}
	p.LimiterCapacity.billing(limiterProps)
	s.LimiterTable = awsdynamodb.NewTable(stack, jsii.String("LimiterTable"), limiterProps)
	p.LimiterCapacity.autoScale(s.LimiterTable)
	// No point-in-time recovery on the limiter table: its items are
	// ephemeral bucket states that expire by TTL, and a missing item is a
	// full bucket, so a restore has nothing to protect. The ARI state
	// table keeps it.
	if cfn, ok := s.LimiterTable.Node().DefaultChild().(awscdk.CfnResource); ok {
		cfn.AddMetadata(jsii.String("cdk_nag"), map[string]interface{}{
			"rules_to_suppress": []interface{}{map[string]interface{}{
				"id":     "AwsSolutions-DDB3",
				"reason": "The limiter table holds only TTL'd token-bucket states; a lost item reads as a full bucket, so backups protect nothing.",
			}},
		})
	}
	stateProps := &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(ari.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(ari.SortKey), Type: awsdynamodb.AttributeType_STRING},
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	}
	p.StateCapacity.billing(stateProps)
	s.StateTable = awsdynamodb.NewTable(stack, jsii.String("StateTable"), stateProps)
	// Sparse: a lane item is in it only while one of its lanes may be
	// stranded (sdk/pipeline/lane), so the sweep reads those items and no others.
	sweepIndex := &awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(lane.SweepIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(lane.SweepAttribute), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(lane.SweepAtAttribute), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	}
	p.StateCapacity.indexCapacity(sweepIndex)
	s.StateTable.AddGlobalSecondaryIndex(sweepIndex)
	p.StateCapacity.autoScale(s.StateTable, lane.SweepIndex)
	// A table of its own, not a key space of the state table: connections
	// are configuration an operator writes, lists and exports (a Scan
	// would otherwise read every ARI cell and lane), small and read about
	// once a minute per property per instance (the cache), so on-demand
	// whatever the state table's capacity; and a bad import is undone by
	// a point-in-time restore of this table alone.
	s.ConnectionsTable = awsdynamodb.NewTable(stack, jsii.String("ConnectionsTable"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(connections.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(connections.SortKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})

	// ---------------------------------------------------------- queues ----

	// The dead-letter queue keeps messages 14 days, longer than the source
	// queues' 4: a standard queue's retention counts from the original
	// enqueue, so a shorter DLQ retention would lose redriven messages.
	s.DeadLetterQueue = awssqs.NewQueue(stack, jsii.String("DeadLetterQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	consumed := func(id string) awssqs.Queue {
		return awssqs.NewQueue(stack, jsii.String(id), &awssqs.QueueProps{
			Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:        jsii.Bool(true),
			RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
			VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(float64(VisibilityTimeoutSeconds(p.FunctionTimeout)))),
			DeadLetterQueue: &awssqs.DeadLetterQueue{
				Queue:           s.DeadLetterQueue,
				MaxReceiveCount: jsii.Number(MaxReceiveCount),
			},
		})
	}
	s.ChangesQueue = consumed("ChangesQueue")
	s.DeferredQueue = consumed("DeferredQueue")

	// ------------------------------------------------------ EventBridge ----

	s.Bus = awsevents.NewEventBus(stack, jsii.String("PmsBus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(p.BusName),
		Description:  jsii.String("PMS change events (source \"pms\") for fleetbucket's sync function"),
	})
	// Events EventBridge cannot deliver to the changes queue (after its
	// retries) go to the dead-letter queue too, so the DLQ alarm sees them.
	s.Rule = awsevents.NewRule(stack, jsii.String("PmsChangesRule"), &awsevents.RuleProps{
		EventBus:     s.Bus,
		Description:  jsii.String("PMS change events to the fleetbucket changes queue"),
		EventPattern: &awsevents.EventPattern{Source: jsii.Strings(PMSSource)},
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewSqsQueue(s.ChangesQueue, &awseventstargets.SqsQueueProps{
				DeadLetterQueue: s.DeadLetterQueue,
			}),
		},
	})

	// -------------------------------------------------------- function ----

	s.LogGroup = awslogs.NewLogGroup(stack, jsii.String("SyncLogGroup"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	// An explicit role with explicit statements instead of the AWS managed
	// AWSLambdaBasicExecutionRole (whose logs actions apply to every log group).
	s.Role = awsiam.NewRole(stack, jsii.String("SyncRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("fleetbucket sync function: its log group, its two tables, its queues; nothing else"),
	})
	s.LogGroup.GrantWrite(s.Role)

	env := map[string]*string{
		EnvLimiterTable:     s.LimiterTable.TableName(),
		EnvStateTable:       s.StateTable.TableName(),
		EnvConnectionsTable: s.ConnectionsTable.TableName(),
		EnvDeferredQueueURL: s.DeferredQueue.QueueUrl(),
		EnvDLQURL:           s.DeadLetterQueue.QueueUrl(),
		EnvMaxReceiveCount:  jsii.String(strconv.Itoa(MaxReceiveCount)),
		EnvConnections:      jsii.String(ConnectionsFile),
		EnvMetricsNamespace: jsii.String(MetricsNamespace),
	}

	s.Function = awslambda.NewFunction(stack, jsii.String("SyncFunction"), &awslambda.FunctionProps{
		Description:  jsii.String("fleetbucket sync: PMS changes and deferred pushes to the OTAs, paced by the fleet's DynamoDB token buckets"),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String(BootstrapFile),
		Code:         awslambda.Code_FromAsset(jsii.String(p.AssetDir), nil),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeoutSeconds)),
		MemorySize:   jsii.Number(float64(p.MemoryMiB)),
		Role:         s.Role,
		LogGroup:     s.LogGroup,
		// The deferred queue is a deliberate Lambda -> SQS -> same Lambda
		// loop. Lambda's loop detection would drop a message after 16 hops,
		// silently, and a job legitimately makes more: a 4-hour wait chains
		// 16 legs of 15 minutes, and a store outage re-defers every
		// cooldown. Dropping work is the one thing the pipeline must not
		// do; each hop is paced by its delay, so the loop cannot spin.
		RecursiveLoop: awslambda.RecursiveLoop_ALLOW,
		Environment:   &env,
		// See ReservedConcurrencyFor; nil (none) with NoReservedConcurrency.
		ReservedConcurrentExecutions: reservedConcurrency(p.ReservedConcurrency),
	})

	// CDK makes the function depend on its role both by GetAtt and by an
	// explicit DependsOn (kept with the role's policy: an event source
	// mapping is only created once the role may read its queue); cfn-lint
	// warns about the redundant half.
	if cfn, ok := s.Function.Node().DefaultChild().(awscdk.CfnResource); ok {
		cfn.AddMetadata(jsii.String("cfn-lint"), map[string]interface{}{
			"config": map[string]interface{}{"ignore_checks": []string{"W3005"}},
		})
	}

	// Least privilege: conditional updates on the two tables (the
	// limiter's GCRA writes; the ARI state's and the lanes' writes),
	// GetItem on the limiter table only (State, Confirm, Silence),
	// BatchGetItem on the state table only (a push's render reads its
	// months in one call), sends to
	// the deferred queue and the DLQ, and the credentials' secrets.
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("Tables"),
		Actions:   jsii.Strings("dynamodb:UpdateItem"),
		Resources: &[]*string{s.LimiterTable.TableArn(), s.StateTable.TableArn(), s.ConnectionsTable.TableArn()},
	}))
	// A property's connections: one query (the cache's read); the
	// UpdateItem above counts a code met unmapped.
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("ConnectionsRead"),
		Actions:   jsii.Strings("dynamodb:Query"),
		Resources: &[]*string{s.ConnectionsTable.TableArn()},
	}))
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("LimiterRead"),
		Actions:   jsii.Strings("dynamodb:GetItem"),
		Resources: &[]*string{s.LimiterTable.TableArn()},
	}))
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StateRead"),
		Actions:   jsii.Strings("dynamodb:BatchGetItem"),
		Resources: &[]*string{s.StateTable.TableArn()},
	}))
	// The sweep: one query of the sweep index, then a read of each lane
	// item it lists.
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SweepIndex"),
		Actions:   jsii.Strings("dynamodb:Query"),
		Resources: &[]*string{jsii.String(*s.StateTable.TableArn() + "/index/" + lane.SweepIndex)},
	}))
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SweepRead"),
		Actions:   jsii.Strings("dynamodb:GetItem"),
		Resources: &[]*string{s.StateTable.TableArn()},
	}))
	if len(p.TokenSecretIDs) > 0 {
		var arns []*string
		for _, id := range p.TokenSecretIDs {
			arns = append(arns, SecretARN(stack, id))
		}
		s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("TokenSecrets"),
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: &arns,
		}))
	}
	// A change whose handling failed is sent again to the changes queue
	// after a short backoff (syncer.Retry) rather than left for the
	// visibility timeout.
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("RetryChanges"),
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: &[]*string{s.ChangesQueue.QueueArn()},
	}))
	s.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("DeferAndDeadLetter"),
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: &[]*string{s.DeferredQueue.QueueArn(), s.DeadLetterQueue.QueueArn()},
	}))
	// Each event source grants consuming its own queue (Receive, Delete,
	// ChangeMessageVisibility, GetQueueAttributes, GetQueueUrl). Each is
	// capped at MaxConcurrency; together they stay within the reserved
	// concurrency (validate), so Lambda never throttles them.
	for _, src := range []struct {
		q      awssqs.Queue
		size   float64
		window awscdk.Duration
	}{
		{s.ChangesQueue, ChangesBatchSize, awscdk.Duration_Seconds(jsii.Number(ChangesBatchingWindow.Seconds()))},
		{s.DeferredQueue, DeferredBatchSize, nil},
	} {
		s.Function.AddEventSource(awslambdaeventsources.NewSqsEventSource(src.q, &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(src.size),
			MaxBatchingWindow:       src.window,
			ReportBatchItemFailures: jsii.Bool(true),
			MaxConcurrency:          jsii.Number(float64(p.MaxConcurrency)),
		}))
	}

	// The sweep's schedule, on the default bus (schedules live there). An
	// invocation that fails is retried by Lambda's asynchronous retries,
	// and the next one finds whatever it left.
	s.SweepRule = awsevents.NewRule(stack, jsii.String("LaneSweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String(fmt.Sprintf("Every %v: push the lanes whose job ended without delivering (fleetbucket sync sweep)", syncer.SweepInterval)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(syncer.SweepInterval.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewLambdaFunction(s.Function, &awseventstargets.LambdaFunctionProps{
				Event: awsevents.RuleTargetInput_FromObject(map[string]interface{}{"action": syncer.SweepAction}),
			}),
		},
	})

	s.addParitySchedules(stack, p.ParityChecks)

	// ------------------------------------------------ alarms, dashboard ----

	s.addAlarms(p)
	s.addDashboard(p)

	// --------------------------------------------------------- outputs ----

	for _, o := range []struct {
		id, description string
		value           *string
	}{
		{"EventBusName", "Put PMS change events (source \"pms\") on this bus", s.Bus.EventBusName()},
		{"ChangesQueueUrl", "SQS changes queue (EventBridge target)", s.ChangesQueue.QueueUrl()},
		{"DeferredQueueUrl", "SQS deferred queue (" + EnvDeferredQueueURL + ")", s.DeferredQueue.QueueUrl()},
		{"DeadLetterQueueUrl", "SQS dead-letter queue (" + EnvDLQURL + ")", s.DeadLetterQueue.QueueUrl()},
		{"LimiterTableName", "DynamoDB limiter table (" + EnvLimiterTable + ")", s.LimiterTable.TableName()},
		{"StateTableName", "DynamoDB ARI state table (" + EnvStateTable + ")", s.StateTable.TableName()},
		{"ConnectionsTableName", "DynamoDB connections table (" + EnvConnectionsTable + "; fleetbucket connections --table)", s.ConnectionsTable.TableName()},
		{"SyncFunctionName", "Lambda sync function", s.Function.FunctionName()},
		{"AlarmTopicArn", "SNS topic the alarms notify (subscribe your pager to it)", s.AlarmTopic.TopicArn()},
		{"DashboardName", "CloudWatch dashboard", s.Dashboard.DashboardName()},
	} {
		awscdk.NewCfnOutput(stack, jsii.String(o.id), &awscdk.CfnOutputProps{
			Value:       o.value,
			Description: jsii.String(o.description),
		})
	}
	return s, nil
}

// SecretARN is the ARN to grant for a secret id: a full ARN as is, a name
// as arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-??????
// (the six characters Secrets Manager appends; "?" matches exactly one).
func SecretARN(stack awscdk.Stack, id string) *string {
	if strings.HasPrefix(id, "arn:") {
		return jsii.String(id)
	}
	return stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("secretsmanager"),
		Resource:     jsii.String("secret"),
		ResourceName: jsii.String(id + "-??????"),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

func reservedConcurrency(n int) *float64 {
	if n <= 0 {
		return nil
	}
	return jsii.Number(float64(n))
}

// VisibilityTimeoutSeconds is the consumed queues' visibility timeout for a
// function timeout (whole seconds).
func VisibilityTimeoutSeconds(functionTimeout time.Duration) int {
	return int(functionTimeout/time.Second) * VisibilityFactor
}
