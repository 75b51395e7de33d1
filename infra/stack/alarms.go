package stack

import (
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"math"
	"net/mail"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"
)

// The function's EMF metrics (functions/sync/handler.go): one line per
// invocation in MetricsNamespace, with no dimensions, every counter
// written (zeros included) on every invocation.
const (
	MetricPushes      = contract.MetricPushes      // requests the OTAs accepted
	MetricDeferrals   = contract.MetricDeferrals   // jobs put on the deferred queue
	MetricSheds       = contract.MetricSheds       // jobs past their deadline, dead-lettered without a token
	MetricDeadLetters = contract.MetricDeadLetters // jobs and events dead-lettered for another reason
	MetricExpired     = contract.MetricExpired     // jobs past their max_age or max_deferrals, dead-lettered
	MetricCoalesced   = contract.MetricCoalesced   // jobs that found their lane already served
	MetricGrants      = contract.MetricGrants      // slots the limiter granted
	MetricWastedSlots = contract.MetricWastedSlots // granted slots left unused (quota lost, never overspent)
	// MetricCredentialRefusals counts pushes whose credential the vendor
	// refused (401/403) with no new token to try: the credential's pushes
	// are paused and its lanes kept until it is fixed.
	MetricCredentialRefusals = contract.MetricCredentialRefusals
	// MetricHotelRefusals counts pushes the vendor refused for the hotel or
	// its connection, not a change: the lane is paused and keeps its
	// changes until the hotel is reconnected.
	MetricHotelRefusals = contract.MetricHotelRefusals
	MetricSweptLanes    = contract.MetricSweptLanes // stranded lanes the sweep scheduled again
	// MetricWaitTime and MetricDeliveryLateness are milliseconds, summed
	// over the jobs of one invocation (one EMF line per invocation).
	MetricWaitTime         = contract.MetricWaitTime
	MetricDeliveryLateness = contract.MetricDeliveryLateness
)

// Defaults of the alarms' thresholds.
const (
	DefaultMaxQueueAge              = 300 * time.Second
	DefaultMaxThrottlePercent       = 5.0
	DefaultThrottleAlarmMinRequests = 20
	DefaultStoreErrorMinutes        = 3

	// MaxSQSDelay is the longest delay SQS gives a message (DelaySeconds
	// 900): a deferred job becomes visible up to this old.
	MaxSQSDelay = 900 * time.Second
)

// Alarms configures the stack's alarms. The zero value is the defaults:
// a new SNS topic with no subscription, and the Default* thresholds.
type Alarms struct {
	// TopicArn is an existing SNS topic to notify; empty: the stack
	// creates one (KMS-encrypted, TLS only).
	TopicArn string
	// Email, if set, subscribes this address to the topic the stack
	// creates (AWS sends a confirmation mail first). Not allowed with
	// TopicArn: subscribe to your own topic yourself.
	Email string
	// MaxQueueAge is the age of the oldest message a work queue may reach
	// before the freshness alarm pages; whole seconds, default
	// DefaultMaxQueueAge. The deferred queue's alarm adds MaxSQSDelay.
	MaxQueueAge time.Duration
	// MaxThrottlePercent is the share of OTA requests answered 429 over 5
	// minutes that pages, in percent (0, 100]; default
	// DefaultMaxThrottlePercent.
	MaxThrottlePercent float64
	// ThrottleAlarmMinRequests is the number of OTA requests (pushes + 429s)
	// in the 5 minutes below which the 429 share is not evaluated, so a
	// lone 429 in a quiet period does not page; default
	// DefaultThrottleAlarmMinRequests.
	ThrottleAlarmMinRequests int
	// StoreErrorMinutes is how many consecutive minutes with limiter store
	// errors page; default DefaultStoreErrorMinutes, at most 60.
	StoreErrorMinutes int
}

func (a Alarms) validate() error {
	switch {
	case a.TopicArn != "" && (!strings.HasPrefix(a.TopicArn, "arn:") || !strings.Contains(a.TopicArn, ":sns:") || strings.ContainsAny(a.TopicArn, "*? ")):
		return fmt.Errorf("stack: Alarms.TopicArn %q is not an SNS topic ARN", a.TopicArn)
	case a.TopicArn != "" && a.Email != "":
		return fmt.Errorf("stack: Alarms.Email is only for the topic the stack creates; with TopicArn %s, subscribe to that topic yourself", a.TopicArn)
	case a.MaxQueueAge < 0 || a.MaxQueueAge%time.Second != 0 || a.MaxQueueAge > 4*24*time.Hour:
		return fmt.Errorf("stack: Alarms.MaxQueueAge %v must be whole seconds up to the queues' 4-day retention", a.MaxQueueAge)
	case a.MaxThrottlePercent < 0 || a.MaxThrottlePercent > 100 || math.IsNaN(a.MaxThrottlePercent):
		return fmt.Errorf("stack: Alarms.MaxThrottlePercent %v is outside (0, 100]", a.MaxThrottlePercent)
	case a.ThrottleAlarmMinRequests < 0:
		return fmt.Errorf("stack: Alarms.ThrottleAlarmMinRequests %d is negative", a.ThrottleAlarmMinRequests)
	case a.StoreErrorMinutes < 0 || a.StoreErrorMinutes > 60:
		return fmt.Errorf("stack: Alarms.StoreErrorMinutes %d is outside [1, 60]", a.StoreErrorMinutes)
	}
	if a.Email != "" {
		addr, err := mail.ParseAddress(a.Email)
		if err != nil || addr.Address != a.Email {
			return fmt.Errorf("stack: Alarms.Email %q is not a plain e-mail address", a.Email)
		}
	}
	return nil
}

func (a Alarms) withDefaults() Alarms {
	if a.MaxQueueAge == 0 {
		a.MaxQueueAge = DefaultMaxQueueAge
	}
	if a.MaxThrottlePercent == 0 {
		a.MaxThrottlePercent = DefaultMaxThrottlePercent
	}
	if a.ThrottleAlarmMinRequests == 0 {
		a.ThrottleAlarmMinRequests = DefaultThrottleAlarmMinRequests
	}
	if a.StoreErrorMinutes == 0 {
		a.StoreErrorMinutes = DefaultStoreErrorMinutes
	}
	return a
}

// emfMetric is one of the function's EMF metrics (no dimensions).
func emfMetric(name, statistic string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String(MetricsNamespace),
		MetricName: jsii.String(name),
		Statistic:  jsii.String(statistic),
		Period:     period,
	})
}

// ThrottleShareExpression is the metric math of the 429 alarm, in percent:
// 429s as a share of OTA requests (pushes accepted + 429s), 0 while there
// were fewer than minRequests requests. Dividing by Pushes alone would
// read a vendor that refuses every request (0 pushes) as no problem.
func ThrottleShareExpression(minRequests int) string {
	return fmt.Sprintf("IF((pushes + throttles) >= %d, 100 * throttles / (pushes + throttles), 0)", minRequests)
}

// alarmTopic imports a.TopicArn or creates the stack's topic.
func (s *SyncStack) alarmTopic(a Alarms) awssns.ITopic {
	if a.TopicArn != "" {
		return awssns.Topic_FromTopicArn(s.Stack, jsii.String("AlarmTopic"), jsii.String(a.TopicArn))
	}
	// SNS encrypts with a customer managed key: CloudWatch cannot publish
	// to a topic under the AWS managed alias/aws/sns key (its policy can
	// not be changed to let the cloudwatch service in).
	key := awskms.NewKey(s.Stack, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
		Description:       jsii.String("fleetbucket alarm topic: SNS server-side encryption; CloudWatch alarms of this account may use it"),
		EnableKeyRotation: jsii.Bool(true),
		// It encrypts notifications in transit through the topic only
		// (SNS stores nothing once delivered): nothing to keep once the
		// stack and its topic are gone. Deletion waits 30 days (KMS).
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"), // in a key policy, "*" is this key
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": s.Stack.Account()}},
	}), nil)
	topic := awssns.NewTopic(s.Stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("fleetbucket alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	// EnforceSSL gives the topic a policy, which replaces SNS's default
	// one: let this account's CloudWatch alarms publish explicitly.
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": s.Stack.Account()}},
	}))
	if a.Email != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(a.Email), nil))
	}
	return topic
}

// addAlarms defines the alarms; each notifies s.AlarmTopic when it fires
// and when it returns to OK.
func (s *SyncStack) addAlarms(p Props) {
	a := p.Alarms
	s.AlarmTopic = s.alarmTopic(a)
	action := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	oneMinute := awscdk.Duration_Minutes(jsii.Number(1))
	fiveMinutes := awscdk.Duration_Minutes(jsii.Number(5))

	type spec struct {
		id, description string
		metric          awscloudwatch.IMetric
		threshold       float64
		periods         int // evaluation periods; all must breach
	}
	add := func(o spec) {
		alarm := awscloudwatch.NewAlarm(s.Stack, jsii.String(o.id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(o.description),
			Metric:             o.metric,
			Threshold:          jsii.Number(o.threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(float64(o.periods)),
			DatapointsToAlarm:  jsii.Number(float64(o.periods)),
			// No data means no traffic (the function writes every metric,
			// zeros included, on every invocation), not a problem.
			TreatMissingData: awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		alarm.AddAlarmAction(action)
		alarm.AddOkAction(action)
		s.Alarms = append(s.Alarms, alarm)
	}
	maxAge := a.MaxQueueAge.Seconds()

	// Freshness. ApproximateAgeOfOldestMessage is the age, counted from
	// when it was sent, of the oldest message that may be received:
	// messages still in their delay are not counted, and SQS leaves out a
	// message received 3 or more times without being deleted (a poison
	// message ends in the dead-letter queue, whose alarm sees it). On the
	// changes queue it is how long the oldest PMS change has waited for
	// the function: 2 consecutive minutes above MaxQueueAge page.
	add(spec{"ChangesQueueAgeAlarm",
		fmt.Sprintf("The oldest PMS change on the changes queue has waited over %.0f s for the sync function: OTAs are going stale (function throttled, failing, or capped too low). Context maxQueueAgeSeconds.", maxAge),
		s.ChangesQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: oneMinute, Statistic: jsii.String("Maximum")}),
		maxAge, 2})
	// On the deferred queue a job is counted once its delay is over, but
	// its age is taken from its send, so it includes that delay (up to
	// MaxSQSDelay): a job that is just due is legitimately up to 900 s
	// old. Hence MaxSQSDelay + MaxQueueAge: the alarm pages when a due job
	// has waited about MaxQueueAge past its slot (later for a job whose
	// delay was shorter than 900 s: the price of one threshold per queue).
	add(spec{"DeferredQueueAgeAlarm",
		fmt.Sprintf("A deferred push job due for over %.0f s is still on the deferred queue (its age counts its delay, up to 900 s, so the threshold is 900 + %.0f s). Context maxQueueAgeSeconds.", maxAge, maxAge),
		s.DeferredQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: oneMinute, Statistic: jsii.String("Maximum")}),
		MaxSQSDelay.Seconds() + maxAge, 2})

	add(spec{"SyncFunctionThrottlesAlarm",
		"Lambda throttled the sync function in the last 5 minutes: throttled SQS batches go back to the queue and spend receive counts towards the dead-letter queue. Check the reserved concurrency against the event sources' caps.",
		s.Function.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: fiveMinutes}),
		0, 1})
	add(spec{"DeadLetterQueueAlarm",
		"Messages in the fleetbucket dead-letter queue: jobs the sync function rejected (see the message's reason attribute), failed 5 times, or events EventBridge could not deliver.",
		s.DeadLetterQueue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: oneMinute, Statistic: jsii.String("Maximum")}),
		0, 1})

	// The 429 share over 5 minutes, not any 429: a few 429s while a fresh
	// bucket's opening burst meets the vendor's own are expected.
	add(spec{"VendorThrottleShareAlarm",
		fmt.Sprintf("Over %.4g %% of OTA requests were answered 429 in 5 minutes (with at least %d requests): the OTA enforces less than the config's limit, or something else spends the same credential. Context maxThrottlePercent, throttleAlarmMinRequests.",
			a.MaxThrottlePercent, a.ThrottleAlarmMinRequests),
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(ThrottleShareExpression(a.ThrottleAlarmMinRequests)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"pushes":    emfMetric(MetricPushes, "Sum", fiveMinutes),
				"throttles": emfMetric(MetricVendorThrottles, "Sum", fiveMinutes),
			},
			Label:  jsii.String("429s, % of OTA requests"),
			Period: fiveMinutes,
		}),
		a.MaxThrottlePercent, 1})

	// Store errors sustained: every one of StoreErrorMinutes consecutive
	// minutes had one. A single error (a throttled or timed-out write the
	// job survives by coming back through SQS) does not page.
	add(spec{"LimiterStoreErrorsAlarm",
		fmt.Sprintf("The sync function failed to reach the limiter table (DynamoDB) in each of the last %d minutes; it fails closed, so pushes are stalled. Context storeErrorMinutes.", a.StoreErrorMinutes),
		emfMetric(MetricLimiterStoreErrors, "Sum", oneMinute),
		0, a.StoreErrorMinutes})

	// A refused credential stops its pushes (paused, lanes kept) until an
	// operator fixes it: any refusal pages.
	add(spec{"CredentialRefusedAlarm",
		"An OTA refused a credential (a 401, or an authentication error inside a 200) and re-reading its token did not fix it: that credential's pushes are paused and its lanes kept pending. Fix the token (secret or token_env), then `fleetbucket dlq redrive` the lanes dead-lettered meanwhile (the sweep also retries them).",
		emfMetric(MetricCredentialRefusals, "Sum", fiveMinutes),
		0, 1})
	// So does a hotel the OTA refuses: no change of it goes until the
	// connection is fixed, and nothing else would tell.
	add(spec{"HotelRefusedAlarm",
		"An OTA refused a hotel or its connection (a 403, an unknown or deactivated hotel id, a property no longer connected, an answer it cannot read), not any change: that hotel's lanes on the channel are paused and keep their changes. Check the hotel_ref and the property's connection at the OTA (the push job's log names the lane), then `fleetbucket dlq redrive` the lanes dead-lettered meanwhile (the sweep also retries them).",
		emfMetric(MetricHotelRefusals, "Sum", fiveMinutes),
		0, 1})

	add(spec{"SyncFunctionErrorsAlarm",
		"The sync function failed invocations (errors or timeouts) in the last 5 minutes.",
		s.Function.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: fiveMinutes}),
		0, 1})
}
