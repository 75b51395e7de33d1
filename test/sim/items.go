package sim

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/truora/minidyn/aws-v2/client"
)

// DB keeps a copy of every item it wrote or read (DB.items), and reads
// answer from it. minidyn converts a whole item between its types and the
// SDK's on every read, which was a fifth of a storm's CPU; the storm reads
// month items of hundreds of days at every push. minidyn still evaluates
// every write and holds the items; the copy is only a faster way to the
// same answer, and with checkItems set (Scenario.CheckItems: the small runs
// go test makes) every read compares the two.
//
// An item in DB.items is never changed in place: a write replaces it
// whole, and it is forgotten before any write to its key, so a write DB
// does not see through keep cannot leave it stale. Reads hand it out
// uncopied (copying month items of hundreds of days was a tenth of a
// storm's allocations), so callers must only read what a read returns:
// the SDK's stores do, and with checkItems set a caller that changed an
// item shows at its next read as a difference from minidyn's.

// keep stores the item at sk as it now is. item must be one nothing else
// will change: minidyn's fresh rendering or a copy.
func (d *DB) keep(sk string, item map[string]types.AttributeValue) {
	if item == nil {
		delete(d.items, sk)
		return
	}
	d.items[sk] = item
}

// forget drops the kept item at sk: a write is about to change it.
func (d *DB) forget(sk string) { delete(d.items, sk) }

// kept is the item kept for key in table, checked against minidyn's
// where the run asks for it, for reading inside DB only.
func (d *DB) kept(table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, bool) {
	item, ok := d.items[sizeKey(table, key)]
	if ok && d.checkItems {
		d.check(table, key, item)
	}
	return item, ok
}

// stored is the item at key in table, or nil, for reading inside DB only.
func (d *DB) stored(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item, ok := d.kept(table, key); ok {
		return item
	}
	item := d.fromMinidyn(table, key)
	if item != nil {
		d.items[sizeKey(table, key)] = item // minidyn's rendering is fresh: nothing else holds it
	}
	return item
}

// fromMinidyn reads the item at key through minidyn.
func (d *DB) fromMinidyn(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := d.shardOf(table, key).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key})
	if err != nil || out == nil || len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

// check panics if the kept item differs from minidyn's.
func (d *DB) check(table string, key, kept map[string]types.AttributeValue) {
	fresh := d.fromMinidyn(table, key)
	if reflect.DeepEqual(fresh, kept) {
		return
	}
	names := map[string]bool{}
	for n := range kept {
		names[n] = true
	}
	for n := range fresh {
		names[n] = true
	}
	var diff []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if k, f := kept[n], fresh[n]; !reflect.DeepEqual(k, f) {
			diff = append(diff, fmt.Sprintf("%s: kept %s, minidyn %s", n, valueText(k), valueText(f)))
		}
	}
	panic(fmt.Sprintf("sim: the item kept for %s differs from minidyn's (a write bypassed DB.forget):\n%s", sizeKey(table, key), strings.Join(diff, "\n")))
}

// valueText renders a value for a message.
func valueText(v types.AttributeValue) string {
	if v == nil {
		return "missing"
	}
	return fmt.Sprintf("%+v", reflect.ValueOf(v).Elem().Field(0).Interface())
}

// projected reports whether a read asks for part of an item, which only
// minidyn answers.
func projected(projection *string, attrs []string) bool {
	return aws.ToString(projection) != "" || len(attrs) > 0
}

// getItem answers a GetItem from the kept items; minidyn answers the
// rest (and refuses what it would), and what it finds is kept.
func (d *DB) getItem(ctx context.Context, table string, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
	if projected(in.ProjectionExpression, in.AttributesToGet) {
		return d.shardOf(table, in.Key).GetItem(ctx, in)
	}
	if item, ok := d.kept(table, in.Key); ok {
		return &dynamodb.GetItemOutput{Item: item}, nil
	}
	out, err := d.shardOf(table, in.Key).GetItem(ctx, in)
	if err == nil && len(out.Item) > 0 {
		d.keep(sizeKey(table, in.Key), out.Item)
	}
	return out, err
}

// batchGetShard answers one shard's part of a BatchGetItem from the kept
// items when it holds every item that exists (d.sizes lists them), in the
// order minidyn would (each table's keys in turn, the items that exist);
// otherwise minidyn answers it, and what it finds is kept. A key with no
// item (a month a cell has no state for) needs no minidyn: seeded items
// stay out of minidyn while a read of their cells asks for such a month.
func (d *DB) batchGetShard(ctx context.Context, c *client.Client, in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for t, ka := range in.RequestItems {
		if projected(ka.ProjectionExpression, ka.AttributesToGet) {
			return c.BatchGetItem(ctx, in)
		}
		items := make([]map[string]types.AttributeValue, 0, len(ka.Keys))
		for _, k := range ka.Keys {
			item, ok := d.kept(t, k)
			if !ok && d.absent(t, k) {
				continue
			}
			if !ok {
				return d.batchGetMinidyn(ctx, c, in)
			}
			items = append(items, item)
		}
		out.Responses[t] = items
	}
	return out, nil
}

// absent reports whether no item is stored at key in table, checked
// against minidyn's where the run asks for it.
func (d *DB) absent(table string, key map[string]types.AttributeValue) bool {
	if _, ok := d.sizes[sizeKey(table, key)]; ok {
		return false
	}
	if d.checkItems && d.fromMinidyn(table, key) != nil {
		panic(fmt.Sprintf("sim: minidyn holds %s, which has no kept size (a write bypassed DB.sizes)", sizeKey(table, key)))
	}
	return true
}

// batchGetMinidyn has minidyn answer a shard's part and keeps each item.
func (d *DB) batchGetMinidyn(ctx context.Context, c *client.Client, in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
	for t, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			d.putSeeded(c, t, sizeKey(t, k))
		}
	}
	out, err := c.BatchGetItem(ctx, in)
	if err != nil {
		return nil, err
	}
	for t, items := range out.Responses {
		for _, item := range items {
			key := map[string]types.AttributeValue{}
			for _, n := range d.keys[t] {
				key[n] = item[n]
			}
			d.keep(sizeKey(t, key), item)
		}
	}
	return out, nil
}
