package cellstate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// retried sends every UpdateItem twice and answers with the second, as the
// SDK's retryer does when the first answer is lost after DynamoDB applied it.
type retried struct{ *dynamodb.Client }

func (r retried) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := r.Client.UpdateItem(ctx, in, optFns...); err != nil {
		return nil, err
	}
	return r.Client.UpdateItem(ctx, in, optFns...)
}

func TestSetSequence(t *testing.T) {
	db := emulator.DynamoDB(t)
	table := fmt.Sprintf("cellstate-%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ari.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
	apply := &ari.Store{DB: db, Table: table}
	cell := Cell{Property: "h1", Kind: "rates", RoomType: "std", RatePlan: "bar"}
	write := func(seq int64) {
		t.Helper()
		_, err := apply.Apply(ctx, ari.Change{EventID: "e", PropertyID: "h1", Sequence: seq, Kind: "rates",
			RoomType: "std", RatePlan: "bar", From: "2027-01-05", To: "2027-01-05", Values: map[string]any{"amount": "1"}})
		if err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name     string
		db       DynamoDBAPI
		held     int64 // the day's sequence before
		from, to int64
		changed  bool // want ErrChanged
		after    int64
	}{
		{"sets it", db, 50, 50, 0, false, 0},
		{"a retried write that already landed is success", retried{db}, 60, 60, 3, false, 3},
		{"another writer moved it", db, 70, 69, 0, true, 70},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := (Store{DB: db, Table: table}).SetSequence(ctx, cell, "2027-01-05", -1, -1); err == nil {
				t.Fatal("a day holding a sequence matched from = -1")
			}
			write(tt.held)
			s := Store{DB: tt.db, Table: table}
			err := s.SetSequence(ctx, cell, "2027-01-05", tt.from, tt.to)
			if errors.Is(err, ErrChanged) != tt.changed || (err != nil && !tt.changed) {
				t.Fatalf("SetSequence = %v, want changed %v", err, tt.changed)
			}
			d, ok, err := s.Day(ctx, cell, "2027-01-05")
			if err != nil || !ok || d.Sequence != tt.after {
				t.Fatalf("Day = %+v %v %v, want sequence %d", d, ok, err, tt.after)
			}
		})
	}
}
