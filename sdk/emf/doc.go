// Package emf writes CloudWatch Embedded Metric Format lines: a metric is a
// JSON log line, so a Lambda reports counters without a PutMetricData call
// (and without the latency, cost and failure mode of one) per invocation.
//
// Begin with a zero Counters: Add values during an invocation and Flush them
// to the function's stdout, one line per flush.
package emf
