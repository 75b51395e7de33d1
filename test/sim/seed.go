package sim

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/truora/minidyn/aws-v2/client"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// State seeded before the run (an onboarding hotel's history) is stored as
// the month items Apply would leave (ari.MonthItems), kept (items.go), and
// put into minidyn only when a call needs minidyn to hold it: a write to
// its key, a read or Query minidyn answers (shardOf, queryShard,
// batchGetMinidyn). Reads the kept items answer never need it. minidyn
// holds an item as a tree of its own types, about 15 KB for a month of
// one cell, 5.3 GB for the 360,000 month items of a full-size onboarding's
// 500 hotels, most of which the run only reads; kept, a month item's days
// share one sequence and one values value. Put at once through minidyn,
// the seed of 50 hotels took 34 s; applied through ari.Store.Apply, that
// of 500 had not ended after 25 min.
//
// The seed is set-up, not traffic: it takes no simulated time, is billed
// to no one and counted in no call, and no store fault reaches it.

// seedState stores c's month items in table as Apply would leave them in
// a table holding none of c's days: the seed refuses a month the store
// holds, since it writes items whole and checks no sequence. One draw of
// a lost answer is made for each item, as for each UpdateItem Apply made,
// so that the run's losses fall where they fell when the seed applied its
// changes.
func (d *DB) seedState(table string, c ari.Change) error {
	items, err := ari.MonthItems(c)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, item := range items {
		key := keyOf(d.keys[table], item)
		sk := sizeKey(table, key)
		if _, ok := d.sizes[sk]; ok {
			return fmt.Errorf("sim: seeding %s: the store already holds %s", c.EventID, sk)
		}
		d.keep(sk, item)
		d.unput[sk] = item
		d.setSize(table, key, itemSize(item))
		if d.lose > 0 {
			d.loseRNG.Float64()
		}
	}
	return nil
}

// putSeeded puts the seeded item at sk into c, minidyn's client that holds
// its key, if it is not there yet, under d.mu.
func (d *DB) putSeeded(c *client.Client, table, sk string) {
	item, ok := d.unput[sk]
	if !ok {
		return
	}
	delete(d.unput, sk)
	if _, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		panic(fmt.Sprintf("sim: putting the seeded %s: %v", sk, err))
	}
}
