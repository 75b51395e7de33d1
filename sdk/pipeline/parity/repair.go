package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// Repairer marks the lanes of drifted dates with their stored state, so
// that the push path sends them again.
type Repairer interface {
	Repair(ctx context.Context, changes []ari.Change) error
}

// RepairChanges are the changes that repair drift of one property: per
// cell, one per run of consecutive drifted dates that share their stored
// sequence and values, at most maxRangeDays long, each carrying that
// sequence and those values. Applied, such a change writes nothing (every
// date already holds its sequence: ari.Store.Apply is sequence-guarded)
// and marks its lanes, whose push reads the state and sends the newest
// values; a change newer than the check wins as always. run names the
// check in the changes' event ids.
func RepairChanges(propertyID, run string, drifts []Drift, maxRangeDays int) ([]ari.Change, error) {
	var out []ari.Change
	for i := 0; i < len(drifts); {
		d := drifts[i]
		var values map[string]any
		if err := json.Unmarshal(d.Stored, &values); err != nil {
			return nil, fmt.Errorf("stored values of %s %s %s %s: %w", d.Kind, d.RoomType, d.RatePlan, d.Date, err)
		}
		c := ari.Change{PropertyID: propertyID, Sequence: d.Sequence, Kind: d.Kind, RoomType: d.RoomType, RatePlan: d.RatePlan,
			From: d.Date, To: d.Date, Values: values}
		j := i + 1
		for ; j < len(drifts) && j-i < maxRangeDays; j++ {
			n := drifts[j]
			if n.Cell != d.Cell || n.Sequence != d.Sequence || string(n.Stored) != string(d.Stored) || n.Date != nextDay(c.To) {
				break
			}
			c.To = n.Date
		}
		c.EventID = fmt.Sprintf("parity-%s-%d", run, len(out))
		out = append(out, c)
		i = j
	}
	return out, nil
}

func nextDay(d string) string {
	t, err := time.Parse(ari.DateLayout, d)
	if err != nil {
		return ""
	}
	return t.AddDate(0, 0, 1).Format(ari.DateLayout)
}

// SQSAPI is the part of *sqs.Client QueueRepairer uses.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// QueueRepairer repairs through the changes queue: each change goes as a
// PMS change event (the sync function takes no other source; its event id
// starts "parity-"), so the sync function marks its lanes as it marks any
// change's, at the live class, on every connection of the property that
// receives its kind.
type QueueRepairer struct {
	SQS      SQSAPI
	QueueURL string
	Now      func() time.Time
}

// source is the event source of a repair's changes: the one ari.Parse
// takes.
const source = "pms"

func (q QueueRepairer) Repair(ctx context.Context, changes []ari.Change) error {
	now := time.Now
	if q.Now != nil {
		now = q.Now
	}
	for start := 0; start < len(changes); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, c := range changes[start:min(start+10, len(changes))] {
			body, err := Envelope(c, now())
			if err != nil {
				return err
			}
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body)})
		}
		out, err := q.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q.QueueURL, Entries: entries})
		if err != nil {
			return fmt.Errorf("send repairs to the changes queue: %w", err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("send repairs to the changes queue: %d of %d refused (%s: %s); run parity again", len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return nil
}

// Envelope is the changes-queue body that carries a repair change: a PMS
// change event, as ari.Parse takes it.
func Envelope(c ari.Change, now time.Time) (string, error) {
	detail, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(ari.Envelope{ID: c.EventID, Source: source, DetailType: "ARI change", Time: now.UTC(), Detail: detail})
	return string(body), err
}
