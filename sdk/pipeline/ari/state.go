package ari

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// State table layout: one item per cell and month, so that a change of a
// range within a month is one conditional write and a push reads a month
// of a cell in one key.
//
//	pk  (S) Change.Cell(): property#kind#room type#rate plan
//	sk  (S) the month, "2027-01"
//	sDD (N) the sequence of the change that wrote day DD ("s05")
//	vDD (S) that change's values, as JSON
//
// Each day carries its own sequence guard, so days of one month written by
// different changes never regress each other. Other items may share the
// table under other sort keys (sdk/pipeline/lane keeps its lanes there).
const (
	PartitionKey = "pk"
	SortKey      = "sk"
	// MonthLayout is the sort key's format.
	MonthLayout = "2006-01"
)

// DynamoDBAPI is the part of *dynamodb.Client the state store uses.
type DynamoDBAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Store keeps the newest ARI per cell and date.
type Store struct {
	DB    DynamoDBAPI
	Table string
}

// ErrRejected is matched by an Apply error that the store refused as
// invalid (an item over DynamoDB's size limit, say): retrying cannot help,
// so the event belongs in the dead-letter queue.
var ErrRejected = errors.New("state store rejected the change")

// Applied is what Apply did to a change's dates.
type Applied struct {
	// Changed counts the dates the change wrote.
	Changed int
	// Current counts the dates that hold this change's sequence after the
	// call: Changed plus those an earlier delivery of it had written.
	Current int
}

// Apply writes c into every date of its range unless that date already
// holds an equal or newer sequence: one conditional write per month, and
// one more per month where a newer change holds some of the dates (the
// failed condition hands back the item, which says which dates are still
// older). It is idempotent, so a redelivered event is harmless.
func (s *Store) Apply(ctx context.Context, c Change) (Applied, error) {
	values, err := encodeValues(c)
	if err != nil {
		return Applied{}, err
	}
	var out Applied
	for _, m := range months(c.Dates()) {
		a, err := s.applyMonth(ctx, c, m.month, m.days, values)
		out.Changed += a.Changed
		out.Current += a.Current
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *Store) applyMonth(ctx context.Context, c Change, month string, days []string, values types.AttributeValue) (Applied, error) {
	var out Applied
	// Each failed write removes at least one date (a newer change took it),
	// so this ends within len(days)+1 writes.
	for range len(days) + 1 {
		in := applyInput(s.Table, c, month, days, values)
		_, err := s.DB.UpdateItem(ctx, in)
		if err == nil {
			out.Changed += len(days)
			out.Current += len(days)
			return out, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if isValidation(err) {
				return out, fmt.Errorf("%w: event %q on %s %s: %v", ErrRejected, c.EventID, c.Cell(), month, err)
			}
			return out, fmt.Errorf("apply event %q to %s %s: %w", c.EventID, c.Cell(), month, err)
		}
		older := days[:0:0]
		for _, d := range days {
			seq, ok, err := daySeq(ccf.Item, d)
			if err != nil {
				return out, err
			}
			switch {
			case !ok || seq < c.Sequence:
				older = append(older, d)
			case seq == c.Sequence:
				out.Current++
			}
		}
		if len(older) == 0 {
			return out, nil
		}
		days = older
	}
	return out, fmt.Errorf("apply event %q to %s %s: newer changes kept landing; retry", c.EventID, c.Cell(), month)
}

// isValidation reports whether DynamoDB refused the request itself (item
// too large, bad expression): a property of the request, not of the moment.
func isValidation(err error) bool {
	var coded interface{ ErrorCode() string }
	return errors.As(err, &coded) && coded.ErrorCode() == "ValidationException"
}

func applyInput(table string, c Change, month string, days []string, values types.AttributeValue) *dynamodb.UpdateItemInput {
	names := map[string]string{}
	vals := map[string]types.AttributeValue{":seq": encodeSequence(c.Sequence), ":v": values}
	set, cond := "SET ", ""
	for i, d := range days {
		dd := d[8:10]
		names["#s"+dd], names["#v"+dd] = dayAttributes(d)
		if i > 0 {
			set += ", "
			cond += " AND "
		}
		set += fmt.Sprintf("#s%s = :seq, #v%s = :v", dd, dd)
		cond += fmt.Sprintf("(attribute_not_exists(#s%s) OR #s%s < :seq)", dd, dd)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           &table,
		Key:                                 monthKey(c.Cell(), month),
		UpdateExpression:                    &set,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// MonthItems are the items Apply leaves for c in a table that holds none
// of its dates: one per month of its range, keyed and laid out as Read
// reads them. A load of state no change has written yet (a simulation's
// seeded history) puts them whole rather than parse a conditional update a
// month; Apply and MonthItems share the layout's encoding, so the two
// cannot hold a day differently.
func MonthItems(c Change) ([]map[string]types.AttributeValue, error) {
	values, err := encodeValues(c)
	if err != nil {
		return nil, err
	}
	seq := encodeSequence(c.Sequence)
	ms := months(c.Dates())
	out := make([]map[string]types.AttributeValue, 0, len(ms))
	for _, m := range ms {
		item := monthKey(c.Cell(), m.month)
		for _, d := range m.days {
			s, v := dayAttributes(d)
			item[s], item[v] = seq, values
		}
		out = append(out, item)
	}
	return out, nil
}

// dayAttributes names the attributes of a month item that hold date's
// state: its sequence and its values ("s05", "v05").
func dayAttributes(date string) (seq, values string) {
	dd := date[8:10]
	return "s" + dd, "v" + dd
}

func encodeSequence(seq int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)}
}

// encodeValues is c's values as each of its days holds them: JSON.
func encodeValues(c Change) (types.AttributeValue, error) {
	b, err := json.Marshal(c.Values)
	if err != nil {
		return nil, err
	}
	return &types.AttributeValueMemberS{Value: string(b)}, nil
}

func monthKey(cell, month string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		PartitionKey: &types.AttributeValueMemberS{Value: cell},
		SortKey:      &types.AttributeValueMemberS{Value: month},
	}
}

// daySeq reads day date's sequence from a month item.
func daySeq(item map[string]types.AttributeValue, date string) (int64, bool, error) {
	s, _ := dayAttributes(date)
	v, ok := item[s].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, true, err
}

type monthDays struct {
	month string
	days  []string
}

// months groups dates (in order) by month.
func months(dates []string) []monthDays {
	var out []monthDays
	for _, d := range dates {
		m := d[:7]
		if len(out) == 0 || out[len(out)-1].month != m {
			out = append(out, monthDays{month: m})
		}
		out[len(out)-1].days = append(out[len(out)-1].days, d)
	}
	return out
}

// Day is one date's current state.
type Day struct {
	Date     string          `json:"date"`
	Sequence int64           `json:"sequence"`
	Values   json.RawMessage `json:"values"`
}

// Range names dates from..to (inclusive) of one cell.
type Range struct {
	Cell     string
	From, To string
}

// Read returns the state of every range, by cell, each cell's days in date
// order and without repeats, with strongly consistent reads: a push must
// see every change applied before it. It reads each (cell, month) once, a
// hundred keys per BatchGetItem, so a push's render is one call.
func (s *Store) Read(ctx context.Context, ranges []Range) (map[string][]Day, error) {
	wanted := map[string]map[string]bool{} // cell → dates
	keys := map[[2]string]bool{}           // (cell, month)
	for _, r := range ranges {
		if wanted[r.Cell] == nil {
			wanted[r.Cell] = map[string]bool{}
		}
		for _, d := range dates(r.From, r.To) {
			wanted[r.Cell][d] = true
			keys[[2]string{r.Cell, d[:7]}] = true
		}
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := map[string][]Day{}
	for cell, ds := range wanted {
		for d := range ds {
			day, ok, err := dayOf(items[[2]string{cell, d[:7]}], d)
			if err != nil {
				return nil, fmt.Errorf("state %s %s: %w", cell, d, err)
			}
			if ok {
				out[cell] = append(out[cell], day)
			}
		}
		sort.Slice(out[cell], func(i, j int) bool { return out[cell][i].Date < out[cell][j].Date })
	}
	return out, nil
}

// maxBatchGet is BatchGetItem's limit on keys per call.
const maxBatchGet = 100

// batchGet reads keys' items, a BatchGetItem per maxBatchGet keys, all at
// once: a resync reads a kind's year of 20 cells (240 cell-months, three
// calls) before it marks its lanes, and a bulk push renders it again, and
// one call after another each waited for three store answers.
func (s *Store) batchGet(ctx context.Context, keys map[[2]string]bool) (map[[2]string]map[string]types.AttributeValue, error) {
	all := make([]map[string]types.AttributeValue, 0, len(keys))
	for k := range keys {
		all = append(all, monthKey(k[0], k[1]))
	}
	var chunks [][]map[string]types.AttributeValue
	for len(all) > 0 {
		n := min(len(all), maxBatchGet)
		chunks, all = append(chunks, all[:n]), all[n:]
	}
	got := make([][]map[string]types.AttributeValue, len(chunks))
	errs := make([]error, len(chunks))
	if len(chunks) == 1 {
		// A change's render, most reads: no goroutine to wait for.
		got[0], errs[0] = s.batchGetChunk(ctx, chunks[0])
	} else {
		var wg sync.WaitGroup
		for i, keys := range chunks {
			wg.Go(func() { got[i], errs[i] = s.batchGetChunk(ctx, keys) })
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	items := map[[2]string]map[string]types.AttributeValue{}
	for _, chunk := range got {
		for _, item := range chunk {
			cell, _ := item[PartitionKey].(*types.AttributeValueMemberS)
			month, _ := item[SortKey].(*types.AttributeValueMemberS)
			if cell == nil || month == nil {
				return nil, fmt.Errorf("state item without pk or sk: %v", item)
			}
			items[[2]string{cell.Value, month.Value}] = item
		}
	}
	return items, nil
}

// batchGetChunk reads up to maxBatchGet keys; unprocessed keys
// (throttling) are asked for again, backing off.
func (s *Store) batchGetChunk(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	req := map[string]types.KeysAndAttributes{s.Table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return nil, err
			}
		}
		out, err := s.DB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("read state: %w", err)
		}
		items = append(items, out.Responses[s.Table]...)
		req = out.UnprocessedKeys
	}
	return items, nil
}

func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(min(attempt, 6)) * 50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// dayOf reads one date of a month item; false if the date has no state.
func dayOf(item map[string]types.AttributeValue, date string) (Day, bool, error) {
	seq, ok, err := daySeq(item, date)
	if err != nil || !ok {
		return Day{}, false, err
	}
	_, v := dayAttributes(date)
	values, ok := item[v].(*types.AttributeValueMemberS)
	if !ok {
		return Day{}, false, errors.New("sequence without values")
	}
	return Day{Date: date, Sequence: seq, Values: json.RawMessage(values.Value)}, true, nil
}

// dates lists from..to inclusive; both must be valid dates.
func dates(from, to string) []string {
	return Change{From: from, To: to}.Dates()
}

// TableAdminAPI is the part of *dynamodb.Client CreateTable uses.
type TableAdminAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTable creates a state table (on-demand) with the lanes' sweep
// index (lane.SweepIndex) and waits until it is active; an existing one is
// left alone. In AWS the CDK stack creates it.
func CreateTable(ctx context.Context, db TableAdminAPI, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(lane.SweepAttribute), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(lane.SweepAtAttribute), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(lane.SweepIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(lane.SweepAttribute), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(lane.SweepAtAttribute), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create state table %q: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute)
}
