package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// connectionsConfig is a config of two channels for the store's tests.
func connectionsConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`{
  "channels": {
    "bk": {"base_url": "https://bk.example", "endpoints": {"availability": {"path": "/a", "limit": {"rate": 5, "burst": 5}}, "rates": {"path": "/r", "limit": {"rate": 5, "burst": 5}}},
           "credentials": {"main": {"token_env": "BK_TOKEN"}}},
    "ex": {"base_url": "https://ex.example", "format": "expedia-ar", "endpoints": {"availability": {"path": "/ar", "limit": {"rate": 5, "burst": 5}}},
           "credentials": {"main": {"token_env": "EX_TOKEN"}}}
  }
}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newConnectionsStore(t *testing.T, db connections.DynamoDBAPI) *connections.Store {
	t.Helper()
	client := emulator.DynamoDB(t)
	if db == nil {
		db = client
	}
	return &connections.Store{DB: db, Table: emulator.NewConnectionsTable(t, client), Config: connectionsConfig(t)}
}

// answerLost sends every PutItem twice and answers with the second
// send's outcome, as the SDK's retry does after an answer the network
// lost (the first send landed).
type answerLost struct{ connections.DynamoDBAPI }

func (a answerLost) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := a.DynamoDBAPI.PutItem(ctx, in, opts...); err != nil {
		return nil, err
	}
	return a.DynamoDBAPI.PutItem(ctx, in, opts...)
}

// A put whose answer was lost and which the SDK sent again finds its own
// item under the condition: it is the write that landed, not another
// writer's, and the operator is not told that the connection changed
// since it was read when the change was their own.
func TestConnectionPutWhoseAnswerWasLostIsItsOwn(t *testing.T) {
	ctx := context.Background()
	s := newConnectionsStore(t, answerLost{emulator.DynamoDB(t)})
	c := connections.Connection{PropertyID: "hotel-1", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "BK-1",
		RoomTypes: map[string]string{"DBL": "101"}, Kinds: []string{"availability"}}}
	v1, err := s.Put(ctx, c)
	if err != nil || v1.Version != 1 {
		t.Fatalf("first put, sent twice: version %d, %v; want 1", v1.Version, err)
	}
	v1.HotelRef = "BK-2"
	v2, err := s.Put(ctx, v1)
	if err != nil || v2.Version != 2 {
		t.Fatalf("a put over version 1, sent twice: version %d, %v; want 2", v2.Version, err)
	}
	stale := v1
	stale.HotelRef = "BK-3"
	var conflict *connections.VersionError
	if _, err := s.Put(ctx, stale); !errors.As(err, &conflict) || conflict.Have != 2 || conflict.Want != 1 {
		t.Fatalf("another writer's put over version 1: %v, want a VersionError (have 2, want 1)", err)
	}
}

// Every write is conditional on the version it read: a second writer of
// the same version, or a first write of a connection that exists, is
// refused with the version the store holds, and nothing it carried lands.
func TestConnectionPutIsConditionalOnTheVersionRead(t *testing.T) {
	ctx := context.Background()
	s := newConnectionsStore(t, nil)
	c := connections.Connection{PropertyID: "hotel-1", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "BK-1",
		RoomTypes: map[string]string{"DBL": "101"}, Kinds: []string{"availability"}}}
	v1, err := s.Put(ctx, c)
	if err != nil || v1.Version != 1 {
		t.Fatalf("first put: version %d, %v; want 1", v1.Version, err)
	}
	var conflict *connections.VersionError
	if _, err := s.Put(ctx, c); !errors.As(err, &conflict) || conflict.Have != 1 || conflict.Want != 0 {
		t.Fatalf("a second first write: %v, want a VersionError holding version 1", err)
	}
	a, b := v1, v1
	a.HotelRef, b.HotelRef = "BK-A", "BK-B"
	if _, err := s.Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, b); !errors.As(err, &conflict) || conflict.Have != 2 || conflict.Want != 1 {
		t.Fatalf("a write over a stale version: %v, want a VersionError (have 2, want 1)", err)
	}
	got, err := s.Connection(ctx, "hotel-1", "bk")
	if err != nil {
		t.Fatal(err)
	}
	if got.HotelRef != "BK-A" || got.Version != 2 || got.RoomTypes["DBL"] != "101" || len(got.Kinds) != 1 {
		t.Fatalf("stored %+v, want the first writer's hotel ref at version 2 with its mapping and kinds", got)
	}
	off, err := s.SetDisabled(ctx, "hotel-1", "bk", true)
	if err != nil || !off.Disabled || off.Version != 3 {
		t.Fatalf("disable: %+v, %v; want disabled at version 3", off, err)
	}
	if _, err := s.Put(ctx, got); !errors.As(err, &conflict) {
		t.Fatalf("a write of the version read before the disable: %v, want a VersionError", err)
	}
}

// A connection the file's rules refuse is never written: the store checks
// it with config.ValidateConnections, each problem at its place.
func TestConnectionPutIsValidatedAsTheFileIs(t *testing.T) {
	ctx := context.Background()
	s := newConnectionsStore(t, nil)
	for _, tc := range []struct {
		name string
		c    connections.Connection
		want string
	}{
		{"unknown channel", connections.Connection{PropertyID: "h", Property: config.Property{Channel: "nope", Credential: "main", HotelRef: "X"}}, `unknown channel "nope"`},
		{"unknown credential", connections.Connection{PropertyID: "h", Property: config.Property{Channel: "bk", Credential: "other", HotelRef: "X"}}, `has no credential "other"`},
		{"no hotel ref", connections.Connection{PropertyID: "h", Property: config.Property{Channel: "bk", Credential: "main"}}, "hotel_ref: empty"},
		{"kind without endpoint", connections.Connection{PropertyID: "h", Property: config.Property{Channel: "ex", Credential: "main", HotelRef: "X", Kinds: []string{"rates"}}}, `has no endpoint "rates"`},
		{"empty id in mapping", connections.Connection{PropertyID: "h", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "X", RatePlans: map[string]string{"BAR": ""}}}, "rate_plans"},
		{"property with #", connections.Connection{PropertyID: "h#1", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "X"}}, "may not be empty or contain '#'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(ctx, tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("put: %v, want an error naming %q", err, tc.want)
			}
			if cs, err := s.Get(ctx, tc.c.PropertyID); err != nil || len(cs) != 0 {
				t.Fatalf("the store holds %+v (%v) after a refused put", cs, err)
			}
		})
	}
}

// unprocessing is a DynamoDB client that hands back, unwritten, the last
// few items of the first batch writes it is given, as DynamoDB does under
// throttling.
type unprocessing struct {
	*dynamodb.Client
	left    atomic.Int64 // batches still to cut short
	dropped atomic.Int64
}

func (u *unprocessing) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if u.left.Add(-1) < 0 {
		return u.Client.BatchWriteItem(ctx, in, opts...)
	}
	kept := map[string][]types.WriteRequest{}
	back := map[string][]types.WriteRequest{}
	for table, reqs := range in.RequestItems {
		n := len(reqs) / 3
		kept[table], back[table] = reqs[:len(reqs)-n], reqs[len(reqs)-n:]
		u.dropped.Add(int64(n))
	}
	out, err := u.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: kept}, opts...)
	if err != nil {
		return nil, err
	}
	out.UnprocessedItems = back
	return out, nil
}

// Import writes 25 items a call and writes again what DynamoDB leaves
// unprocessed, until every connection is stored.
func TestImportRetriesUnprocessedItems(t *testing.T) {
	ctx := context.Background()
	db := &unprocessing{Client: emulator.DynamoDB(t)}
	db.left.Store(3)
	s := newConnectionsStore(t, db)
	var conns []connections.Connection
	for i := range 110 {
		conns = append(conns, connections.Connection{PropertyID: fmt.Sprintf("hotel-%04d", i), Property: config.Property{Channel: "bk", Credential: "main", HotelRef: fmt.Sprintf("BK-%d", i)}})
	}
	rep, err := s.Import(ctx, conns, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 110 items are 5 batches (4 of 25, 1 of 10); 3 of them were cut short
	// (8 items handed back of a 25, 3 of the 10), each written again once.
	if rep.Connections != 110 || rep.Retried != int(db.dropped.Load()) || rep.Retried == 0 || rep.Calls != 5+3 {
		t.Fatalf("import report %+v (%d items handed back), want 110 written in 5 calls and one retry of each of the 3 cut batches", rep, db.dropped.Load())
	}
	n := 0
	if err := s.List(ctx, func(c connections.Connection) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 110 {
		t.Fatalf("the store lists %d connections, want 110", n)
	}
	bad := append(conns[:1:1], connections.Connection{PropertyID: "hotel-x", Property: config.Property{Channel: "zz", Credential: "main", HotelRef: "Z"}})
	bad[0].PropertyID = "hotel-new"
	if _, err := s.Import(ctx, bad, 1); err == nil || !strings.Contains(err.Error(), "nothing written") {
		t.Fatalf("import with an invalid connection: %v, want it refused whole", err)
	}
	if cs, _ := s.Get(ctx, "hotel-new"); len(cs) != 0 {
		t.Fatalf("a refused import wrote %+v", cs)
	}
}

// Import loads 10,000 properties; the time it takes on the emulator is
// logged (docs/operations.md states it). FLEETBUCKET_IMPORT_BENCH=1 runs it.
func TestImportOfTenThousandProperties(t *testing.T) {
	if testing.Short() || os.Getenv("FLEETBUCKET_IMPORT_BENCH") != "1" {
		t.Skip("set FLEETBUCKET_IMPORT_BENCH=1 to time an import of 10,000 properties")
	}
	ctx := context.Background()
	s := newConnectionsStore(t, nil)
	conns := make([]connections.Connection, 10_000)
	for i := range conns {
		conns[i] = connections.Connection{PropertyID: fmt.Sprintf("hotel-%05d", i), Property: config.Property{Channel: "bk", Credential: "main", HotelRef: fmt.Sprintf("BK-%d", i),
			RoomTypes: map[string]string{"DBL": "1001", "SGL": "1002", "SUI": "1003"}, RatePlans: map[string]string{"BAR": "2001", "NRF": "2002"}}}
	}
	start := time.Now()
	rep, err := s.Import(ctx, conns, 4)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Connections != 10_000 || rep.Calls < 400 {
		t.Fatalf("import report %+v, want 10,000 written in at least 400 calls of 25", rep)
	}
	t.Logf("imported %d connections in %v: %d BatchWriteItem calls, %d items retried (%.0f connections/s)",
		rep.Connections, took.Round(10*time.Millisecond), rep.Calls, rep.Retried, float64(rep.Connections)/took.Seconds())
}
