// Package cellstate reads and repairs one ARI state cell, for the operator
// CLI. The layout is sdk/pipeline/ari's: one item per cell and month (pk = property#
// kind#room type#rate plan, sk = "YYYY-MM") with, per day DD, its sequence
// sDD (N) and values vDD (S).
//
// A day takes only changes with a higher sequence than it holds, so a
// runaway sequence (a PMS bug sending 2^63−1) freezes it for good.
// SetSequence sets it back, so the next change writes the day again.
package cellstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// DynamoDBAPI is the part of *dynamodb.Client this package uses.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Cell names one state cell.
type Cell struct {
	Property, Kind, RoomType, RatePlan string
}

// Validate names the first problem with c.
func (c Cell) Validate() error {
	if !slices.Contains(ari.Kinds, c.Kind) {
		return fmt.Errorf("kind %q: want one of %s", c.Kind, strings.Join(ari.Kinds, ", "))
	}
	for _, f := range []struct{ name, v string }{{"property", c.Property}, {"room", c.RoomType}, {"rate plan", c.RatePlan}} {
		if strings.Contains(f.v, "#") {
			return fmt.Errorf("%s %q contains '#', which no cell key holds", f.name, f.v)
		}
	}
	if c.Property == "" || c.RoomType == "" {
		return errors.New("property and room are required")
	}
	return nil
}

// Key is the cell's partition key, as sdk/pipeline/ari writes it.
func (c Cell) Key() string {
	return ari.Change{PropertyID: c.Property, Kind: c.Kind, RoomType: c.RoomType, RatePlan: c.RatePlan}.Cell()
}

// Store reads and repairs cells of one state table.
type Store struct {
	DB    DynamoDBAPI
	Table string
}

// Month returns the days of month ("2027-01") that hold state, in order.
func (s Store) Month(ctx context.Context, c Cell, month string) ([]ari.Day, error) {
	if _, err := time.Parse(ari.MonthLayout, month); err != nil {
		return nil, fmt.Errorf("month %q: want YYYY-MM, e.g. 2027-01", month)
	}
	item, err := s.get(ctx, c, month)
	if err != nil {
		return nil, err
	}
	var days []ari.Day
	for dd := 1; dd <= 31; dd++ {
		d, ok, err := day(item, fmt.Sprintf("%s-%02d", month, dd))
		if err != nil {
			return nil, err
		}
		if ok {
			days = append(days, d)
		}
	}
	return days, nil
}

// Day returns one date's state; false if the date holds none.
func (s Store) Day(ctx context.Context, c Cell, date string) (ari.Day, bool, error) {
	if _, err := time.Parse(ari.DateLayout, date); err != nil {
		return ari.Day{}, false, fmt.Errorf("date %q: want YYYY-MM-DD, e.g. 2027-01-05", date)
	}
	item, err := s.get(ctx, c, date[:7])
	if err != nil {
		return ari.Day{}, false, err
	}
	return day(item, date)
}

// ErrChanged: the day's sequence is no longer the one the caller saw.
var ErrChanged = errors.New("the day changed meanwhile")

// SetSequence sets date's sequence from `from` (what the caller saw) to
// `to`, conditional on it still being `from`, and leaves its values alone:
// the next change with a sequence above `to` overwrites them.
func (s Store) SetSequence(ctx context.Context, c Cell, date string, from, to int64) error {
	dd := date[8:10]
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.Table,
		Key:                       key(c, date[:7]),
		UpdateExpression:          aws.String("SET #s = :to"),
		ConditionExpression:       aws.String("#s = :from"),
		ExpressionAttributeNames:  map[string]string{"#s": "s" + dd},
		ExpressionAttributeValues: map[string]types.AttributeValue{":to": num(to), ":from": num(from)},
		// The SDK retries a write whose answer was lost; the retry then
		// finds the day at `to` already, which is success, not a change.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if d, ok, _ := day(ccf.Item, date); ok && d.Sequence == to {
			return nil
		}
		return fmt.Errorf("%w: %s of %s no longer holds sequence %d; run cell show and try again", ErrChanged, date, c.Key(), from)
	}
	if err != nil {
		return s.storeError("UpdateItem", err)
	}
	return nil
}

func (s Store) get(ctx context.Context, c Cell, month string) (map[string]types.AttributeValue, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.Table, Key: key(c, month), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, s.storeError("GetItem", err)
	}
	return out.Item, nil
}

func (s Store) storeError(op string, err error) error {
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return fmt.Errorf("state table %q not found: pass --state-table or set FLEETBUCKET_STATE_TABLE (the stack's StateTableName output), or start the local stack", s.Table)
	}
	return fmt.Errorf("%s on state table %q: %w", op, s.Table, err)
}

func key(c Cell, month string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		ari.PartitionKey: &types.AttributeValueMemberS{Value: c.Key()},
		ari.SortKey:      &types.AttributeValueMemberS{Value: month},
	}
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// day reads date from a month item; false if it holds no sequence.
func day(item map[string]types.AttributeValue, date string) (ari.Day, bool, error) {
	dd := date[8:10]
	s, ok := item["s"+dd].(*types.AttributeValueMemberN)
	if !ok {
		return ari.Day{}, false, nil
	}
	seq, err := strconv.ParseInt(s.Value, 10, 64)
	if err != nil {
		return ari.Day{}, false, fmt.Errorf("%s: sequence %q is not an integer: %w", date, s.Value, err)
	}
	d := ari.Day{Date: date, Sequence: seq, Values: json.RawMessage("null")}
	if v, ok := item["v"+dd].(*types.AttributeValueMemberS); ok {
		d.Values = json.RawMessage(v.Value)
	}
	return d, true, nil
}
