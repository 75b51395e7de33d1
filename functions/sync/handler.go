package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/fleetbucket/fleetbucket/sdk/emf"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/credentials"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// outcomeMetric names the counter of each outcome.
var outcomeMetric = map[dispatch.Outcome]string{
	dispatch.Pushed: contract.MetricPushes, dispatch.Deferred: contract.MetricDeferrals, dispatch.Shed: contract.MetricSheds,
	dispatch.DeadLettered: contract.MetricDeadLetters, dispatch.Coalesced: contract.MetricCoalesced, dispatch.Expired: contract.MetricExpired,
}

// metricNames are written on every flush, zeros included, so that alarms
// on them see data rather than missing points.
var metricNames = contract.Counters

// millisMetricNames are likewise written on every flush, in milliseconds.
var millisMetricNames = contract.Millis

type handler struct {
	syncer *syncer.Syncer
	// tokens caches the credentials' tokens; the push path drops one
	// (Cache.Invalidate, which pipeline.New makes the syncer's Invalidate)
	// when an OTA answers 401/403.
	tokens        *credentials.Cache
	deferredQueue string // messages from it are push jobs; the rest are PMS changes
	log           *slog.Logger
	metrics       *emf.Counters
	namespace     string
	out           io.Writer
	// queues sends failed changes again (syncer.Retry) to the queue they
	// came from; nil leaves them to the visibility timeout.
	queues *changeQueues
	// parity runs parity events (parity.go); conns reads their
	// connections (nil: the file's properties).
	parity *parity.Checker
	conns  parity.ConnectionsAPI
}

// Invoke routes an invocation: an SQS batch from the function's event
// sources (Handle), or the stack's schedules asking for a sweep (Sweep) or
// a parity check (Parity).
func (h *handler) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var in struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(raw, &in) == nil && in.Action == syncer.SweepAction {
		return h.Sweep(ctx)
	}
	if in.Action == parity.Action {
		return h.Parity(ctx, raw)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil || ev.Records == nil {
		return nil, fmt.Errorf("invocation is neither an SQS batch nor {\"action\": %q}: %.200s", syncer.SweepAction, raw)
	}
	return h.Handle(ctx, ev)
}

// sweepOutput is what a scheduled sweep answers.
type sweepOutput struct {
	Items int `json:"items"`
	Lanes int `json:"lanes"`
}

// Sweep schedules the lanes left with pending changes and no live job
// (syncer.Sweep) and counts what became of their jobs like any other.
// An error fails the invocation, visibly; the next sweep finds what this
// one left.
func (h *handler) Sweep(ctx context.Context) (sweepOutput, error) {
	h.zeroMetrics()
	rep, err := h.syncer.Sweep(ctx)
	for _, res := range rep.Results {
		h.observe(res, "")
	}
	h.metrics.Add(contract.MetricSweptLanes, float64(rep.Lanes))
	h.log.Info("sweep", "items", rep.Items, "lanes", rep.Lanes, "err", err)
	if ferr := h.metrics.Flush(h.out, h.namespace, time.Now()); ferr != nil {
		h.log.Warn("metrics not written", "err", ferr)
	}
	return sweepOutput{Items: rep.Items, Lanes: rep.Lanes}, err
}

func (h *handler) zeroMetrics() {
	for _, name := range metricNames {
		h.metrics.Add(name, 0)
	}
	for _, name := range millisMetricNames {
		h.metrics.AddMillis(name, 0)
	}
}

// Handle processes a batch. Its jobs are dispatched together: those of one
// bucket are booked with one write, and each waits for its own slot
// concurrently. A record whose handling failed is reported as a batch item
// failure and comes back; nothing else does.
func (h *handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	h.zeroMetrics()
	msgs := make([]syncer.Message, len(ev.Records))
	for i, rec := range ev.Records {
		attempt := syncer.AttemptOf(aws.ToString(rec.MessageAttributes[syncer.RetryAttribute].StringValue))
		receives, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
		msgs[i] = syncer.Message{ID: rec.MessageId, Body: rec.Body, Deferred: strings.HasSuffix(rec.EventSourceARN, ":"+h.deferredQueue),
			Receives: receives, Redelivered: receives > 1 || attempt > 0, Attempt: attempt,
			Owners: syncer.OwnersOf(aws.ToString(rec.MessageAttributes[syncer.RetryOwnersAttribute].StringValue))}
	}
	var resp events.SQSEventResponse
	outs := h.syncer.HandleBatch(ctx, msgs)
	retried := h.retry(ctx, ev, msgs, outs)
	for _, out := range outs {
		if out.Change.Invalid != "" {
			h.metrics.Add(contract.MetricDeadLetters, 1)
			h.log.Warn("message dead-lettered", "message_id", out.ID, "event_id", out.Change.EventID, "reason", out.Change.Invalid)
		}
		for _, res := range out.Jobs {
			h.observe(res, out.Change.EventID)
		}
		if out.Err != nil && retried[out.ID] {
			h.log.Error("change sent again after a backoff", "message_id", out.ID, "err", out.Err)
		} else if out.Err != nil {
			h.log.Error("message left on its queue for redelivery", "message_id", out.ID, "err", out.Err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: out.ID})
		}
	}
	if err := h.metrics.Flush(h.out, h.namespace, time.Now()); err != nil {
		h.log.Warn("metrics not written", "err", err)
	}
	return resp, nil
}

// observe logs one job's outcome and counts it. The job id names the lane
// (property, kind, channel, credential id, hotel ref) and its owner token;
// no API token ever reaches a log.
func (h *handler) observe(res dispatch.Result, eventID string) {
	h.log.Info(contract.LogMessage,
		contract.LogJobID, res.JobID, "event_id", eventID, contract.LogBucket, res.Bucket, contract.LogDecision, string(res.Outcome),
		contract.LogPushes, res.Pushes, "items", res.Items, contract.LogWaitMs, res.Wait.Milliseconds(), contract.LogLateMs, res.Lateness.Milliseconds(),
		"reason", res.Reason, "attempts", res.Attempts, contract.LogThrottled, res.Throttled, contract.LogWasted, res.WastedSlots,
		"shadow_would_defer", res.ShadowWouldDefer, "shadow_would_shed", res.ShadowWouldShed, "shadow_wait_ms", res.ShadowWait.Milliseconds(),
		"local_shares", res.LocalShares, "vendor_warnings", res.Warnings, "refused_changes", res.Refused, "isolation_requests", res.Isolation)
	if res.Outcome != dispatch.Pushed {
		h.metrics.Add(outcomeMetric[res.Outcome], 1)
	}
	h.metrics.Add(contract.MetricPushes, float64(res.Pushes))
	h.metrics.Add(contract.MetricPushedItems, float64(res.Items))
	h.metrics.Add(contract.MetricVendorThrottles, float64(res.Throttled))
	if res.StoreError {
		h.metrics.Add(contract.MetricLimiterStoreErrors, 1)
	}
	if !res.Slot.IsZero() {
		h.metrics.Add(contract.MetricGrants, 1)
	}
	h.metrics.Add(contract.MetricWastedSlots, float64(res.WastedSlots))
	h.metrics.AddMillis(contract.MetricWaitTime, res.Wait)
	if res.ShadowWouldDefer {
		h.metrics.Add(contract.MetricShadowWouldDefer, 1)
	}
	if res.ShadowWouldShed {
		h.metrics.Add(contract.MetricShadowWouldShed, 1)
	}
	if res.ShadowWait > 0 {
		// What enforcement would have waited for the slot: the pace an
		// endpoint in shadow mode would lose by switching to enforce.
		h.metrics.AddMillis(contract.MetricShadowWait, res.ShadowWait)
	}
	h.metrics.Add(contract.MetricLocalSharePushes, float64(res.LocalShares))
	// A vendor's warnings on applied requests, the changes it refused
	// (each dead-lettered alone) and the requests spent finding them.
	h.metrics.Add(contract.MetricVendorWarnings, float64(res.Warnings))
	h.metrics.Add(contract.MetricRefusedChanges, float64(res.Refused))
	h.metrics.Add(contract.MetricIsolationRequests, float64(res.Isolation))
	if res.CredentialRefused {
		// The vendor refuses a credential no new token fixed: its pushes
		// are paused and its lanes kept; an operator must fix it.
		h.metrics.Add(contract.MetricCredentialRefusals, 1)
	}
	if res.HotelRefused {
		// The vendor refuses the hotel or its connection, not a change:
		// the lane is paused and keeps its changes; an operator must
		// reconnect or correct the hotel.
		h.metrics.Add(contract.MetricHotelRefusals, 1)
	}
	if res.Delayed != 0 || res.Lateness != 0 {
		// How late the deferred queue delivered: the dispatcher comes back
		// early by what it sees, and this shows whether that keeps up.
		h.metrics.AddMillis(contract.MetricDeliveryLateness, res.Lateness)
	}
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}
