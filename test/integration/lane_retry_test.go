package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// sentTwice sends an armed UpdateItem twice and answers the second copy,
// as the AWS SDK's retryer does when a write's answer is lost after it
// landed (seen on the emulator under load: "retrying request
// DynamoDB/UpdateItem, attempt 2").
type sentTwice struct {
	lane.DynamoDBAPI
	armed *bool
}

func (f sentTwice) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if *f.armed {
		*f.armed = false
		if _, err := f.DynamoDBAPI.UpdateItem(ctx, in, o...); err != nil {
			return nil, err
		}
	}
	return f.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// A lane write sent again after it landed is the caller's own, not another
// owner's: the sweep takes the lane up, an owner's lease ends, a push's
// finish releases the lane. Before, the second copy failed the condition
// the first had met and each read as a lost lane: the sweep took up
// nothing (the lane waited a lease more), and EndLease and Finish answered
// *lane.NotOwnerError, which makes an abandoned job a duplicate, not
// dead-lettered (TestEndLeaseBacksOffOnlyFailedPushes failed so in CI).
func TestLaneWritesSentAgainAfterTheyLandedAreTheCallers(t *testing.T) {
	t.Parallel()
	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	ended := func(ctx context.Context, s *lane.Store) {
		if err := s.EndLease(ctx, id, "t0", true); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// before brings the lane to where the write under test starts.
		before func(context.Context, *lane.Store)
		// write is sent twice; it fails the test if the caller is told
		// anything but that its write was done.
		write func(context.Context, *lane.Store, time.Time) error
	}{
		{"the sweep's takeover", ended, func(ctx context.Context, s *lane.Store, now time.Time) error {
			items, err := s.Due(ctx, 0)
			if err != nil || len(items) != 1 {
				return errors.Join(err, errors.New("the lane is not due for the sweep"))
			}
			marks, err := s.Sweep(ctx, items[0], func(lane.ID) string { return "swept" })
			if err == nil && len(marks) != 1 {
				err = errors.New("the sweep took up no lane")
			}
			return err
		}},
		{"the end of a lease", nil, func(ctx context.Context, s *lane.Store, _ time.Time) error {
			return s.EndLease(ctx, id, "t0", false)
		}},
		{"a push's finish", nil, func(ctx context.Context, s *lane.Store, _ time.Time) error {
			released, _, err := s.Finish(ctx, id, "t0", []lane.Element{el("DBL", 1)})
			if err == nil && !released {
				err = errors.New("the lane was not released")
			}
			return err
		}},
		{"a release", func(ctx context.Context, s *lane.Store) {
			if _, err := s.Claim(ctx, id, "t0", "t1", []lane.Element{el("DBL", 1)}); err != nil {
				t.Fatal(err)
			}
		}, func(ctx context.Context, s *lane.Store, _ time.Time) error {
			_, err := s.Release(ctx, id, "t1")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
			s := newLaneStore(t, func() time.Time { return now })
			if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{el("DBL", 1)}, func(lane.ID) string { return "t0" }); err != nil {
				t.Fatal(err)
			}
			if tt.before != nil {
				tt.before(ctx, s)
			}
			now = now.Add(time.Minute)
			armed := true
			s.DB = sentTwice{DynamoDBAPI: s.DB, armed: &armed}
			if err := tt.write(ctx, s, now); err != nil {
				t.Fatalf("sent twice: %v, want the write done", err)
			}
			if armed {
				t.Fatal("no write was sent twice: the test proves nothing")
			}
		})
	}
}
