package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

// Capacity puts a table on provisioned capacity, which auto scaling keeps
// within Read and Write (capacity units a second) at TargetUtilization
// percent of what the table consumes. A nil *Capacity (the default) leaves
// the table on demand.
//
// Why: a channel manager's changes follow a day's curve, and the same
// units provisioned cost about 2.4 times less than on demand (the simulated
// steady run's DynamoDB: $2.51 per million changes against $6.07;
// docs/benchmarks.md). What it costs: a burst above the provisioned rate
// draws on DynamoDB's burst capacity (up to 300 s of unused capacity) and,
// past that, is throttled until auto scaling catches up, which takes
// minutes. A throttled limiter call fails closed (the push is deferred,
// never sent unmetered), so a storm beyond Max slows the fleet instead of
// overspending the OTAs. Keep spiky loads on demand, or set Min to carry
// the storms.
type Capacity struct {
	Read, Write Range
	// TargetUtilization is the share of the provisioned units auto
	// scaling aims to consume, in percent (20..90); 0 means
	// DefaultTargetUtilization.
	TargetUtilization int
}

// Range is what auto scaling may set a table's capacity to, in units a
// second.
type Range struct{ Min, Max int }

const (
	// DefaultTargetUtilization is auto scaling's usual target.
	DefaultTargetUtilization = 70
	// MaxTableCapacity is DynamoDB's default per-table quota of read (and
	// of write) capacity units; an account may have it raised.
	MaxTableCapacity = 40000
)

func (c *Capacity) validate(table string) error {
	if c == nil {
		return nil
	}
	for _, r := range []struct {
		name string
		Range
	}{{"Read", c.Read}, {"Write", c.Write}} {
		if r.Min < 1 || r.Max < r.Min || r.Max > MaxTableCapacity {
			return fmt.Errorf("stack: %s.%s {Min %d, Max %d}: want 1 ≤ Min ≤ Max ≤ %d capacity units a second", table, r.name, r.Min, r.Max, MaxTableCapacity)
		}
	}
	if t := c.TargetUtilization; t != 0 && (t < 20 || t > 90) {
		return fmt.Errorf("stack: %s.TargetUtilization %d: want 20..90 percent (0: %d)", table, t, DefaultTargetUtilization)
	}
	return nil
}

func (c *Capacity) target() int {
	if c.TargetUtilization == 0 {
		return DefaultTargetUtilization
	}
	return c.TargetUtilization
}

// billing sets props' billing mode for c: on demand for nil, else
// provisioned at c's minimum, from which autoScale lets it grow.
func (c *Capacity) billing(props *awsdynamodb.TableProps) {
	if c == nil {
		props.BillingMode = awsdynamodb.BillingMode_PAY_PER_REQUEST
		return
	}
	props.BillingMode = awsdynamodb.BillingMode_PROVISIONED
	props.ReadCapacity, props.WriteCapacity = jsii.Number(c.Read.Min), jsii.Number(c.Write.Min)
}

// autoScale scales t's reads and writes on utilization, and those of its
// global secondary indexes: an index throttled on writes throttles the
// table's writes too, so each index may grow to the table's maxima.
func (c *Capacity) autoScale(t awsdynamodb.Table, indexes ...string) {
	if c == nil {
		return
	}
	scale := func(a awsdynamodb.IScalableTableAttribute) {
		a.ScaleOnUtilization(&awsdynamodb.UtilizationScalingProps{TargetUtilizationPercent: jsii.Number(c.target())})
	}
	within := func(r Range) *awsdynamodb.EnableScalingProps {
		return &awsdynamodb.EnableScalingProps{MinCapacity: jsii.Number(r.Min), MaxCapacity: jsii.Number(r.Max)}
	}
	scale(t.AutoScaleReadCapacity(within(c.Read)))
	scale(t.AutoScaleWriteCapacity(within(c.Write)))
	for _, ix := range indexes {
		scale(t.AutoScaleGlobalSecondaryIndexReadCapacity(jsii.String(ix), within(Range{1, c.Read.Max})))
		scale(t.AutoScaleGlobalSecondaryIndexWriteCapacity(jsii.String(ix), within(Range{1, c.Write.Max})))
	}
}

// indexCapacity is a global secondary index's starting capacity on a
// provisioned table (none on demand): one unit each, which auto scaling
// raises with the index's use.
func (c *Capacity) indexCapacity(props *awsdynamodb.GlobalSecondaryIndexProps) {
	if c != nil {
		props.ReadCapacity, props.WriteCapacity = jsii.Number(1), jsii.Number(1)
	}
}
