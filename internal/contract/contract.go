// Package contract holds the names the sync function, the CDK stack, the
// operator CLI and the tests must agree on: the function's environment, the
// files of its asset, its CloudWatch metrics and the fields of its log line.
// Each is spelled here once; the stack's tests check the synthesized
// template against these, and the function's tests check what it reads and
// emits, so a renamed variable or metric fails a test instead of a
// deployment.
package contract

// The function's environment, set by the stack.
const (
	EnvLimiterTable     = "FLEETBUCKET_TABLE"
	EnvStateTable       = "FLEETBUCKET_STATE_TABLE"
	EnvDeferredQueueURL = "FLEETBUCKET_DEFERRED_QUEUE_URL"
	EnvDLQURL           = "FLEETBUCKET_DLQ_URL"
	EnvConnections      = "FLEETBUCKET_CONNECTIONS"
	EnvMetricsNamespace = "FLEETBUCKET_METRICS_NAMESPACE"
	// EnvMaxConcurrency overrides the event sources' maximum concurrency the
	// config implies (local-share sizes its shares by it); optional.
	EnvMaxConcurrency = "FLEETBUCKET_MAX_CONCURRENCY"
	// EnvConnectionsTable names the connections table
	// (sdk/pipeline/connections); unset, the connections file's
	// properties say where changes go.
	EnvConnectionsTable = "FLEETBUCKET_CONNECTIONS_TABLE"
	// EnvMaxReceiveCount is the deferred queue's maxReceiveCount (its
	// redrive policy): a lane job received for that time hands its lane to
	// the sweep before it works (sdk/pipeline/syncer's receives.go).
	EnvMaxReceiveCount = "FLEETBUCKET_MAX_RECEIVE_COUNT"
	// EnvChangesQueueURL is the changes queue, where a parity check sends
	// its repairs, the CLI's resync and connection writes their resync
	// events (and its dlq redrive sends changes back).
	EnvChangesQueueURL = "FLEETBUCKET_CHANGES_QUEUE_URL"
)

// RequiredEnv are the variables the function refuses to start without.
var RequiredEnv = []string{EnvLimiterTable, EnvStateTable, EnvDeferredQueueURL, EnvDLQURL, EnvMaxReceiveCount}

// FunctionEnv is every variable the function reads (LAMBDA_TASK_ROOT and
// the AWS SDK's own aside).
var FunctionEnv = append(append([]string{}, RequiredEnv...), EnvConnections, EnvMetricsNamespace, EnvMaxConcurrency, EnvConnectionsTable)

// The function's asset directory.
const (
	BootstrapFile   = "bootstrap"        // the binary (runtime provided.al2023)
	ConnectionsFile = "connections.json" // the config, beside it
)

// MetricsNamespace is the CloudWatch namespace of the function's EMF metrics
// unless EnvMetricsNamespace says otherwise.
const MetricsNamespace = "fleetbucket"

// Counters the function emits once per invocation (EMF, no dimensions).
const (
	MetricPushes             = "Pushes"          // requests the OTAs accepted
	MetricPushedItems        = "PushedItems"     // items those requests carried
	MetricDeferrals          = "Deferrals"       // jobs put on the deferred queue
	MetricSheds              = "Sheds"           // jobs past their deadline, dead-lettered without a token
	MetricDeadLetters        = "DeadLetters"     // jobs and events dead-lettered for another reason
	MetricExpired            = "Expired"         // jobs past their max_age or max_deferrals
	MetricCoalesced          = "Coalesced"       // jobs that found their lane already served
	MetricGrants             = "Grants"          // slots the limiter granted
	MetricWastedSlots        = "WastedSlots"     // granted slots left unused
	MetricVendorThrottles    = "VendorThrottles" // OTA 429s and throttling answers
	MetricLimiterStoreErrors = "LimiterStoreErrors"
	MetricShadowWouldDefer   = "ShadowWouldDefer"
	MetricShadowWouldShed    = "ShadowWouldShed"
	MetricLocalSharePushes   = "LocalSharePushes"
	// MetricCredentialRefusals counts pushes whose credential the vendor
	// refused (a 401, or an authentication error inside a 200) after a
	// fresh read of the secret.
	MetricCredentialRefusals = "CredentialRefusals"
	// MetricHotelRefusals counts pushes the vendor refused for the hotel
	// or its connection (an unknown or deactivated hotel id, a property no
	// longer connected, a 403), not for any change they carried.
	MetricHotelRefusals = "HotelRefusals"
	MetricSweptLanes    = "SweptLanes" // stranded lanes the sweep scheduled again
	// MetricVendorWarnings counts the warnings OTAs sent with applied
	// requests; MetricRefusedChanges the changes an OTA refused, each
	// dead-lettered alone; MetricIsolationRequests the extra requests spent
	// isolating them from the changes merged with them.
	MetricVendorWarnings    = "VendorWarnings"
	MetricRefusedChanges    = "RefusedChanges"
	MetricIsolationRequests = "IsolationRequests"
)

// Millisecond sums the function emits per invocation.
const (
	MetricWaitTime         = "WaitTime"
	MetricDeliveryLateness = "DeliveryLateness"
	MetricShadowWait       = "ShadowWait"
)

// Counters and Millis list every metric above, for the function to declare
// and the tests to check.
var (
	Counters = []string{MetricPushes, MetricPushedItems, MetricDeferrals, MetricSheds, MetricDeadLetters,
		MetricExpired, MetricCoalesced, MetricGrants, MetricWastedSlots, MetricVendorThrottles,
		MetricLimiterStoreErrors, MetricShadowWouldDefer, MetricShadowWouldShed, MetricLocalSharePushes,
		MetricCredentialRefusals, MetricHotelRefusals, MetricSweptLanes, MetricVendorWarnings, MetricRefusedChanges, MetricIsolationRequests}
	Millis = []string{MetricWaitTime, MetricDeliveryLateness, MetricShadowWait}
)

// Fields of the function's one JSON log line per job ("push job"), which the
// dashboard's Logs Insights queries read.
const (
	LogMessage   = "push job"
	LogJobID     = "job_id"
	LogBucket    = "bucket"
	LogDecision  = "decision"
	LogPushes    = "pushes"
	LogThrottled = "throttled"
	LogWasted    = "wasted_slots"
	LogWaitMs    = "wait_ms"
	LogLateMs    = "late_ms"
)
