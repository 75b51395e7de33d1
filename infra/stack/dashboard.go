package stack

import (
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"math"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// Quota is the limit of one (credential, meter) bucket as the connections
// config gives it ("limit"; further per-minute "limits" may bind tighter
// and are not shown). Endpoints that share a meter share one bucket, and
// one Quota.
type Quota struct {
	Channel, Credential string
	// Meter is what the endpoints count against: an endpoint's "meter",
	// or its own name (config.Channel.MeterOf).
	Meter string
	Rate  float64 // requests per second
	Burst int
}

// Bucket is the bucket's key, as the function logs it
// (config.BucketKey).
func (q Quota) Bucket() string {
	return config.BucketKey(q.Channel, q.Credential, q.Meter)
}

func (q Quota) validate() error {
	for _, part := range []string{q.Channel, q.Credential, q.Meter} {
		if part == "" || strings.ContainsAny(part, "#\"'\\") {
			return fmt.Errorf("stack: Quotas: bucket %q: channel, credential and meter must be non-empty, without # or quotes", q.Bucket())
		}
	}
	if !(q.Rate > 0) || math.IsInf(q.Rate, 0) || q.Burst < 1 {
		return fmt.Errorf("stack: Quotas: bucket %q: rate %v burst %d, want rate > 0 and burst ≥ 1", q.Bucket(), q.Rate, q.Burst)
	}
	return nil
}

// Per-bucket metrics. The function's EMF metrics have no dimensions, so
// the stack derives per-bucket ones from its structured "push job" log
// line (functions/sync/handler.go, observe: JSON from slog, one line per
// job) with metric filters, in their own namespace so that they never add
// to the EMF totals.
const (
	BucketMetricsNamespace = "fleetbucket/buckets"
	BucketDimension        = "Bucket"

	// The push job log line's message and fields.
	pushJobMessage = "push job"
	logBucket      = "$." + contract.LogBucket
	logPushes      = "$." + contract.LogPushes
	logThrottled   = "$." + contract.LogThrottled
	logWasted      = "$." + contract.LogWasted
	logWaitMs      = "$." + contract.LogWaitMs
	logLateMs      = "$." + contract.LogLateMs
	logDecision    = "$." + contract.LogDecision

	// MaxBucketWidgets bounds the dashboard's per-bucket graphs; the
	// by-bucket graphs (SEARCH) show every bucket regardless.
	MaxBucketWidgets = 40
)

// bucketFilter is one metric filter: a metric per bucket from the push job
// line, where the line matches and carries value.
type bucketFilter struct {
	id, metric, where, value string
	unit                     awscloudwatch.Unit
}

var bucketFilters = []bucketFilter{
	{"Pushes", MetricPushes, "", logPushes, awscloudwatch.Unit_COUNT},
	{"Throttles", MetricVendorThrottles, "", logThrottled, awscloudwatch.Unit_COUNT},
	{"Deferrals", MetricDeferrals, ` && ` + logDecision + ` = "deferred"`, "1", awscloudwatch.Unit_COUNT},
	{"WastedSlots", MetricWastedSlots, "", logWasted, awscloudwatch.Unit_COUNT},
	// Per job, unlike the EMF WaitTime (summed per invocation).
	{"WaitTime", MetricWaitTime, "", logWaitMs, awscloudwatch.Unit_MILLISECONDS},
	// Late deliveries only: percentiles need non-negative values, and an
	// early one (negative) is no delay.
	{"DeliveryLateness", MetricDeliveryLateness, ` && ` + logLateMs + ` > 0`, logLateMs, awscloudwatch.Unit_MILLISECONDS},
}

func bucketMetric(metric, bucket, statistic string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(BucketMetricsNamespace),
		MetricName:    jsii.String(metric),
		DimensionsMap: &map[string]*string{BucketDimension: jsii.String(bucket)},
		Statistic:     jsii.String(statistic),
		Period:        period,
	})
}

// bucketSearch is every bucket's series of a per-bucket metric.
func bucketSearch(metric, statistic, label string) awscloudwatch.MathExpression {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s} MetricName="%s"', '%s', 60)`, BucketMetricsNamespace, BucketDimension, metric, statistic)),
		Label:      jsii.String(label),
		Period:     awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

// perSecond turns a Sum into a rate that stays per second whatever period
// the dashboard picks; id names the sum in the graph (unique per graph).
func perSecond(id string, m awscloudwatch.IMetric, label string) awscloudwatch.MathExpression {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(id + " / PERIOD(" + id + ")"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{id: m},
		Label:        jsii.String(label),
		Period:       awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

func annotation(value float64, label string) *awscloudwatch.HorizontalAnnotation {
	return &awscloudwatch.HorizontalAnnotation{Value: jsii.Number(value), Label: jsii.String(label), Color: jsii.String("#d62728")}
}

// addDashboard defines the per-bucket metric filters and the dashboard.
func (s *SyncStack) addDashboard(p Props) {
	for _, f := range bucketFilters {
		s.BucketMetricFilters = append(s.BucketMetricFilters, awslogs.NewMetricFilter(s.Stack, jsii.String("Bucket"+f.id+"Filter"), &awslogs.MetricFilterProps{
			LogGroup:        s.LogGroup,
			FilterPattern:   awslogs.FilterPattern_Literal(jsii.String(`{ $.msg = "` + pushJobMessage + `"` + f.where + ` }`)),
			MetricNamespace: jsii.String(BucketMetricsNamespace),
			MetricName:      jsii.String(f.metric),
			MetricValue:     jsii.String(f.value),
			Dimensions:      &map[string]*string{BucketDimension: jsii.String(logBucket)},
			Unit:            f.unit,
		}))
	}

	quotas := append([]Quota(nil), p.Quotas...)
	sort.Slice(quotas, func(i, j int) bool { return quotas[i].Bucket() < quotas[j].Bucket() })
	totalRate := 0.0
	for _, q := range quotas {
		totalRate += q.Rate
	}

	oneMinute := awscdk.Duration_Minutes(jsii.Number(1))
	sum := func(name string) awscloudwatch.Metric { return emfMetric(name, "Sum", oneMinute) }
	graph := func(title string, width float64, left []awscloudwatch.IMetric, ann ...*awscloudwatch.HorizontalAnnotation) awscloudwatch.GraphWidget {
		props := &awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Width: jsii.Number(width), Height: jsii.Number(6), Left: &left}
		if len(ann) > 0 {
			props.LeftAnnotations = &ann
		}
		return awscloudwatch.NewGraphWidget(props)
	}
	var rows [][]awscloudwatch.IWidget
	row := func(w ...awscloudwatch.IWidget) { rows = append(rows, w) }

	row(awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Markdown: jsii.String(dashboardText(quotas, p)), Width: jsii.Number(24), Height: jsii.Number(float64(min(4+len(quotas), 4+MaxBucketWidgets/2)))}))
	var alarms []interfacesawscloudwatch.IAlarmRef
	for _, a := range s.Alarms {
		alarms = append(alarms, a)
	}
	row(awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{Title: jsii.String("Alarms"), Alarms: &alarms, Width: jsii.Number(24), Height: jsii.Number(3)}))

	// Totals (EMF, no dimensions).
	var quotaLine []*awscloudwatch.HorizontalAnnotation
	if totalRate > 0 {
		quotaLine = append(quotaLine, annotation(totalRate, fmt.Sprintf("quota, all buckets: %.4g/s", totalRate)))
	}
	row(
		graph("Pushes per second, all buckets, against the summed quota", 8,
			[]awscloudwatch.IMetric{perSecond("pushes", sum(MetricPushes), "pushes/s"), perSecond("grants", sum(MetricGrants), "grants/s")}, quotaLine...),
		graph("Job outcomes per minute", 8, []awscloudwatch.IMetric{sum(MetricDeferrals), sum(MetricSheds), sum(MetricDeadLetters), sum(MetricExpired), sum(MetricCoalesced)}),
		awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String("OTA 429s per minute, and their share of requests (%)"), Width: jsii.Number(8), Height: jsii.Number(6),
			Left: &[]awscloudwatch.IMetric{sum(MetricVendorThrottles)},
			Right: &[]awscloudwatch.IMetric{awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression:   jsii.String(ThrottleShareExpression(1)), // 0, not a division by zero, in a minute without requests
				UsingMetrics: &map[string]awscloudwatch.IMetric{"pushes": sum(MetricPushes), "throttles": sum(MetricVendorThrottles)},
				Label:        jsii.String("429 share %"),
				Period:       oneMinute,
			})},
			RightAnnotations: &[]*awscloudwatch.HorizontalAnnotation{annotation(p.Alarms.MaxThrottlePercent, "alarm (over 5 min)")},
		}),
	)
	row(
		graph("Slots: granted and wasted per minute", 8, []awscloudwatch.IMetric{sum(MetricGrants), sum(MetricWastedSlots)}),
		graph("p99 wait per job by bucket (ms)", 8, []awscloudwatch.IMetric{bucketSearch(MetricWaitTime, "p99", "")}),
		graph("p99 delivery lateness of deferred jobs by bucket (ms)", 8, []awscloudwatch.IMetric{bucketSearch(MetricDeliveryLateness, "p99", "")}),
	)

	// Queues.
	age := func(q interface {
		MetricApproximateAgeOfOldestMessage(*awscloudwatch.MetricOptions) awscloudwatch.Metric
	}, label string) awscloudwatch.Metric {
		return q.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: oneMinute, Label: jsii.String(label)})
	}
	maxAge := p.Alarms.MaxQueueAge.Seconds()
	queueOpts := func(label string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: oneMinute, Label: jsii.String(label)}
	}
	row(
		graph("Age of the oldest message (s)", 8,
			[]awscloudwatch.IMetric{age(s.ChangesQueue, "changes"), age(s.DeferredQueue, "deferred (its delay included)")},
			annotation(maxAge, "changes alarm"), annotation(MaxSQSDelay.Seconds()+maxAge, "deferred alarm")),
		graph("Queue depth", 8, []awscloudwatch.IMetric{
			s.ChangesQueue.MetricApproximateNumberOfMessagesVisible(queueOpts("changes visible")),
			s.ChangesQueue.MetricApproximateNumberOfMessagesNotVisible(queueOpts("changes in flight")),
			s.DeferredQueue.MetricApproximateNumberOfMessagesVisible(queueOpts("deferred due")),
			s.DeferredQueue.MetricApproximateNumberOfMessagesDelayed(queueOpts("deferred waiting for their slot")),
			s.DeferredQueue.MetricApproximateNumberOfMessagesNotVisible(queueOpts("deferred in flight")),
		}),
		graph("Dead-letter queue depth", 8, []awscloudwatch.IMetric{s.DeadLetterQueue.MetricApproximateNumberOfMessagesVisible(queueOpts("dead letters"))}, annotation(0, "alarm above")),
	)

	// Function.
	var concLines []*awscloudwatch.HorizontalAnnotation
	if s.ReservedConcurrency > 0 {
		concLines = append(concLines, annotation(float64(s.ReservedConcurrency), "reserved"))
	}
	concLines = append(concLines, &awscloudwatch.HorizontalAnnotation{Value: jsii.Number(float64(EventSources * p.MaxConcurrency)), Label: jsii.String("event sources' caps")})
	fnSum := &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: oneMinute}
	row(
		graph("Sync function concurrency", 8, []awscloudwatch.IMetric{s.Function.Metric(jsii.String("ConcurrentExecutions"), &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: oneMinute})}, concLines...),
		graph("Sync function invocations, errors, throttles per minute", 8, []awscloudwatch.IMetric{s.Function.MetricInvocations(fnSum), s.Function.MetricErrors(fnSum), s.Function.MetricThrottles(fnSum)}),
		graph("Sync function duration p99 (ms)", 8, []awscloudwatch.IMetric{s.Function.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: oneMinute})}),
	)

	// DynamoDB. On-demand tables report consumed capacity too; with items
	// under 1 KB a write unit is one write (a failed conditional write
	// included, a transactional one counts 2), so units per grant is
	// about limiter writes per grant.
	row(
		graph("DynamoDB calls per push (capacity units per grant / per push)", 12, []awscloudwatch.IMetric{
			awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("lw / grants"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"lw":     s.LimiterTable.MetricConsumedWriteCapacityUnits(fnSum),
					"grants": sum(MetricGrants),
				},
				Label: jsii.String("limiter write units per grant"), Period: oneMinute,
			}),
			awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("(sw + sr) / pushes"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"sw":     s.StateTable.MetricConsumedWriteCapacityUnits(fnSum),
					"sr":     s.StateTable.MetricConsumedReadCapacityUnits(fnSum),
					"pushes": sum(MetricPushes),
				},
				Label: jsii.String("state table units per push"), Period: oneMinute,
			}),
		}),
		graph("DynamoDB per minute: limiter writes, contention, store errors", 12, []awscloudwatch.IMetric{
			s.LimiterTable.MetricConsumedWriteCapacityUnits(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: oneMinute, Label: jsii.String("limiter write units")}),
			s.LimiterTable.MetricConditionalCheckFailedRequests(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: oneMinute, Label: jsii.String("limiter conditional check failures")}),
			sum(MetricLimiterStoreErrors),
		}),
	)

	// Per bucket: pushes against its own quota.
	var cells []awscloudwatch.IWidget
	for i, q := range quotas {
		if i == MaxBucketWidgets {
			break
		}
		b := q.Bucket()
		perMin := func(metric, label string) awscloudwatch.IMetric {
			m := bucketMetric(metric, b, "Sum", oneMinute)
			return m.With(&awscloudwatch.MetricOptions{Label: jsii.String(label)})
		}
		cells = append(cells, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(b), Width: jsii.Number(6), Height: jsii.Number(6),
			Left:            &[]awscloudwatch.IMetric{perSecond("pushes", bucketMetric(MetricPushes, b, "Sum", oneMinute), "pushes/s")},
			LeftAnnotations: &[]*awscloudwatch.HorizontalAnnotation{annotation(q.Rate, fmt.Sprintf("quota %.4g/s", q.Rate))},
			Right: &[]awscloudwatch.IMetric{
				perMin(MetricVendorThrottles, "429s/min"), perMin(MetricDeferrals, "deferrals/min"), perMin(MetricWastedSlots, "wasted slots/min"),
			},
		}))
	}
	for len(cells) > 0 {
		n := min(4, len(cells))
		row(cells[:n]...)
		cells = cells[n:]
	}
	row(graph("Pushes per minute by bucket (all buckets)", 24, []awscloudwatch.IMetric{bucketSearch(MetricPushes, "Sum", "")}))

	var widgets []*[]awscloudwatch.IWidget
	for i := range rows {
		widgets = append(widgets, &rows[i])
	}
	s.Dashboard = awscloudwatch.NewDashboard(s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
		Widgets:         &widgets,
	})
}

// dashboardText is the dashboard's heading: what is where, and the quotas.
func dashboardText(quotas []Quota, p Props) string {
	var b strings.Builder
	b.WriteString("# fleetbucket sync\n")
	b.WriteString("Totals are the function's EMF metrics (namespace `" + MetricsNamespace + "`, no dimensions). ")
	b.WriteString("Per-bucket graphs come from metric filters on its `push job` log lines (namespace `" + BucketMetricsNamespace + "`, dimension `" + BucketDimension + "` = channel#credential#endpoint). ")
	b.WriteString(fmt.Sprintf("Each event source is capped at %d concurrent batches.\n\n", p.MaxConcurrency))
	if len(quotas) == 0 {
		b.WriteString("No quotas were given to the stack.\n")
		return b.String()
	}
	b.WriteString("| bucket | rate /s | burst |\n|---|---|---|\n")
	for i, q := range quotas {
		if i == MaxBucketWidgets {
			fmt.Fprintf(&b, "| … %d more | | |\n", len(quotas)-i)
			break
		}
		fmt.Fprintf(&b, "| %s | %.4g | %d |\n", q.Bucket(), q.Rate, q.Burst)
	}
	return b.String()
}
