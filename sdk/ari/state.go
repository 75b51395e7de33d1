package ari

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// State table layout: pk = Change.Cell(), sk = date, seq (N), values (S,
// the JSON of the values), event (S, the event that wrote it).
const (
	PartitionKey = "pk"
	SortKey      = "sk"
)

// DynamoDBAPI is the part of *dynamodb.Client the state store uses.
type DynamoDBAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Store keeps the newest ARI per cell and date.
type Store struct {
	DB    DynamoDBAPI
	Table string
}

// Apply writes c into every date of its range unless that date already
// holds an equal or newer sequence. It is idempotent, so a redelivered
// event is harmless; it returns how many dates it changed.
func (s *Store) Apply(ctx context.Context, c Change) (int, error) {
	values, err := json.Marshal(c.Values)
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, date := range c.Dates() {
		_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.Table,
			Key: map[string]types.AttributeValue{
				PartitionKey: &types.AttributeValueMemberS{Value: c.Cell()},
				SortKey:      &types.AttributeValueMemberS{Value: date},
			},
			UpdateExpression:         aws.String("SET #seq = :seq, #v = :v, #e = :e"),
			ConditionExpression:      aws.String("attribute_not_exists(#seq) OR #seq < :seq"),
			ExpressionAttributeNames: map[string]string{"#seq": "seq", "#v": "values", "#e": "event"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":seq": &types.AttributeValueMemberN{Value: strconv.FormatInt(c.Sequence, 10)},
				":v":   &types.AttributeValueMemberS{Value: string(values)},
				":e":   &types.AttributeValueMemberS{Value: c.EventID},
			},
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			changed++
		case errors.As(err, &ccf):
			// A newer (or the same) change is already there.
		default:
			return changed, fmt.Errorf("apply event %q to %s %s: %w", c.EventID, c.Cell(), date, err)
		}
	}
	return changed, nil
}

// Day is one date's current state.
type Day struct {
	Date     string          `json:"date"`
	Sequence int64           `json:"sequence"`
	Values   json.RawMessage `json:"values"`
}

// Read returns the state of cell for dates from..to (inclusive), in date
// order, with a strongly consistent read: a push must see every change
// applied before it.
func (s *Store) Read(ctx context.Context, cell, from, to string) ([]Day, error) {
	var days []Day
	p := dynamodb.NewQueryPaginator(s.DB, &dynamodb.QueryInput{
		TableName:                 &s.Table,
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :from AND :to"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: cell}, ":from": &types.AttributeValueMemberS{Value: from}, ":to": &types.AttributeValueMemberS{Value: to}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read state %s %s..%s: %w", cell, from, to, err)
		}
		for _, item := range page.Items {
			d, err := day(item)
			if err != nil {
				return nil, err
			}
			days = append(days, d)
		}
	}
	return days, nil
}

func day(item map[string]types.AttributeValue) (Day, error) {
	date, _ := item[SortKey].(*types.AttributeValueMemberS)
	seq, _ := item["seq"].(*types.AttributeValueMemberN)
	values, _ := item["values"].(*types.AttributeValueMemberS)
	if date == nil || seq == nil || values == nil {
		return Day{}, fmt.Errorf("state item is missing sk, seq or values: %v", item)
	}
	n, err := strconv.ParseInt(seq.Value, 10, 64)
	if err != nil {
		return Day{}, err
	}
	return Day{Date: date.Value, Sequence: n, Values: json.RawMessage(values.Value)}, nil
}

// TableAdminAPI is the part of *dynamodb.Client CreateTable uses.
type TableAdminAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTable creates a state table (on-demand) and waits until it is
// active; an existing one is left alone. In AWS the CDK stack creates it.
func CreateTable(ctx context.Context, db TableAdminAPI, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create state table %q: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute)
}
