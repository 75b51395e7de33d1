package ari

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// slowDB answers each BatchGetItem after latency with the items it holds,
// and counts the calls.
type slowDB struct {
	latency time.Duration
	items   map[[2]string]map[string]types.AttributeValue

	mu    sync.Mutex
	calls int
}

func (d *slowDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, fmt.Errorf("slowDB: no writes")
}

func (d *slowDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	time.Sleep(d.latency)
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			pk, sk := k[PartitionKey].(*types.AttributeValueMemberS), k[SortKey].(*types.AttributeValueMemberS)
			if item, ok := d.items[[2]string{pk.Value, sk.Value}]; ok {
				out.Responses[table] = append(out.Responses[table], item)
			}
		}
	}
	return out, nil
}

// A read of more cell-months than one BatchGetItem takes asks for them all
// at once: a resync reads a kind's year of 20 cells (240 cell-months, three
// calls) before it marks its lanes, and one call after the other its
// planning waited three store answers where one would do (the onboarding's
// first bulk push 3.2 s after its resync, docs/benchmarks.md). Every day is
// still read.
func TestReadOfMoreKeysThanOneCallTakesOneStoreAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &slowDB{latency: 10 * time.Millisecond, items: map[[2]string]map[string]types.AttributeValue{}}
		var ranges []Range
		for room := range 5 {
			for plan := range 4 {
				c := Change{EventID: "e", PropertyID: "hotel-aurora", Sequence: 1, Kind: "rates", RoomType: fmt.Sprintf("R%d", room),
					RatePlan: fmt.Sprintf("P%d", plan), From: "2027-01-01", To: "2027-12-31", Values: map[string]any{"amount": 100}}
				items, err := MonthItems(c)
				if err != nil {
					t.Fatal(err)
				}
				for _, item := range items {
					pk, sk := item[PartitionKey].(*types.AttributeValueMemberS), item[SortKey].(*types.AttributeValueMemberS)
					db.items[[2]string{pk.Value, sk.Value}] = item
				}
				ranges = append(ranges, Range{Cell: c.Cell(), From: c.From, To: c.To})
			}
		}
		s := &Store{DB: db, Table: "state"}
		start := time.Now()
		got, err := s.Read(context.Background(), ranges)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); db.calls != 3 || took != db.latency {
			t.Errorf("read 240 cell-months with %d BatchGetItems in %v, want 3 calls in %v (one store answer)", db.calls, took, db.latency)
		}
		days := 0
		for _, ds := range got {
			days += len(ds)
		}
		if days != 20*365 {
			t.Errorf("read %d days, want %d (20 cells × 365)", days, 20*365)
		}
	})
}
