package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// An operator connects a hotel, maps its codes, edits it over the version
// read, disables and enables it, and moves every connection to another
// table by export and import.
func TestConnectionsCommands(t *testing.T) {
	cfg := emulator.Config(t)
	db := dynamodb.NewFromConfig(cfg, emulator.ForEmulator)
	table := emulator.NewConnectionsTable(t, db)
	other := table + "-2"
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &other}) })
	file := writeFile(t, "connections.json", goodConfig)
	c := newCLI(t, map[string]string{"FLEETBUCKET_CONNECTIONS_TABLE": table, "FLEETBUCKET_CONNECTIONS": file})

	out := c.run("connections", "put", "h2", "bk", "--credential", "c1", "--hotel-ref", "BK-2",
		"--room-type", "DBL=1001", "--rate-plan", "BAR=2001", "--kinds", "availability,rates").must(t)
	if !strings.Contains(out, "h2  bk  credential c1  hotel BK-2  enabled  availability,rates  1 room types, 1 rate plans mapped  version 1") {
		t.Fatalf("put printed %q", out)
	}
	got := decode[[]connJSON](t, c.run("--json", "connections", "get", "h2").must(t))
	if len(got) != 1 || got[0].RoomTypes["DBL"] != "1001" || got[0].RatePlans["BAR"] != "2001" || got[0].Version != 1 {
		t.Fatalf("get: %+v", got)
	}
	c.run("connections", "put", "h2", "bk", "--credential", "c1", "--hotel-ref", "BK-2", "--version", "0").fails(t, "exists already (version 1)")
	c.run("connections", "put", "h2", "nope", "--credential", "c1", "--hotel-ref", "X").fails(t, `properties.h2[0].channel: unknown channel "nope"`)
	c.run("connections", "put", "h2", "bk", "--credential", "c1", "--hotel-ref", "BK-2", "--room-type", "DBL").fails(t, "want PMS_CODE=OTA_ID")
	c.run("connections", "disable", "h2", "bk").must(t)
	if got := decode[connJSON](t, c.run("--json", "connections", "enable", "h2", "bk").must(t)); got.Disabled || got.Version != 3 {
		t.Fatalf("disable then enable: %+v, want enabled at version 3", got)
	}
	c.run("connections", "put", "h3", "bk", "--credential", "c1", "--hotel-ref", "BK-3", "--disabled").must(t)
	if n := strings.Count(c.run("connections", "list").must(t), "\n"); n != 2 {
		t.Fatalf("list printed %d lines, want 2", n)
	}
	export := writeFile(t, "export.json", c.run("connections", "export").must(t))
	c.run("connections", "create-table", "--table", other).must(t)
	imp := decode[importResult](t, c.run("--json", "connections", "import", export, "--table", other).must(t))
	if imp.Connections != 2 || imp.Calls != 1 {
		t.Fatalf("import: %+v, want 2 connections in one call", imp)
	}
	moved := decode[[]connJSON](t, c.run("--json", "connections", "get", "h3", "--table", other).must(t))
	if len(moved) != 1 || !moved[0].Disabled || moved[0].HotelRef != "BK-3" {
		t.Fatalf("the export did not carry h3 whole: %+v", moved)
	}
	c.run("connections", "get", "h9").fails(t, `property "h9" has no connections`)
}

// unmapped lists the counters the pipeline keeps, the most frequent first.
func TestConnectionsUnmapped(t *testing.T) {
	cfg := emulator.Config(t)
	db := dynamodb.NewFromConfig(cfg, emulator.ForEmulator)
	table := emulator.NewConnectionsTable(t, db)
	s := &connections.Store{DB: db, Table: table, Now: func() time.Time { return time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) }}
	for i := range 3 {
		if err := s.CountUnmapped(context.Background(), "h1", "bk", "room_type", "SUI"); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := s.CountUnmapped(context.Background(), "h1", "bk", "rate_plan", "NRF"); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := newCLI(t, map[string]string{"FLEETBUCKET_CONNECTIONS_TABLE": table})
	out := c.run("connections", "unmapped").must(t)
	want := "     3  h1  bk  room type \"SUI\"  last 2026-12-01T09:00:00Z\n     1  h1  bk  rate plan \"NRF\"  last 2026-12-01T09:00:00Z\n"
	if out != want {
		t.Fatalf("unmapped printed\n%s\nwant\n%s", out, want)
	}
}
