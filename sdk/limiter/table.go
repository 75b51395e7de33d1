package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAdminAPI is the part of *dynamodb.Client that CreateTable uses.
type TableAdminAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates a limiter table (on-demand, TTL on TTLAttribute) and
// waits until it is active. An existing table is left as it is. In AWS the
// CDK stack creates the table; this is for local stacks and tests.
func CreateTable(ctx context.Context, db TableAdminAPI, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(KeyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(KeyAttribute), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %q: %w", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute); err != nil {
		return fmt.Errorf("wait for table %q: %w", name, err)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
	})
	// DynamoDB refuses to enable TTL twice with a ValidationException.
	if err != nil && !isValidation(err) {
		return fmt.Errorf("enable TTL on table %q: %w", name, err)
	}
	return nil
}

func isValidation(err error) bool {
	var apiErr interface{ ErrorCode() string }
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException"
}
