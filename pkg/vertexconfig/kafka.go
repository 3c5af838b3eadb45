package vertexconfig

import (
	"context"
	"strings"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/kafka"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// buildKafkaSource opens the Kafka source at path.
func kafkaSource(env vertex.Env, path string, k *config.KafkaSource) (isb.Reader, error) {
	client, err := kafkaClient(env, path, k.Brokers, k.TLS, k.SASL, k.Config, kafka.RoleSource)
	if err != nil {
		return nil, err
	}
	var topics []string
	for t := range strings.SplitSeq(k.Topic, ",") {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	src, err := kafka.NewSource(context.Background(), kafka.SourceConfig{Client: client, Topics: topics,
		Group: k.ConsumerGroup, ReadTimeout: env.Limits.ReadTimeout})
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	env.OnClose(src.Close)
	env.Log.Info("kafka source", zap.Strings("topics", topics), zap.String("consumerGroup", k.ConsumerGroup))
	return src, nil
}

// kafkaClient reads a Kafka client's secrets and parses its config.
func kafkaClient(env vertex.Env, path string, brokers []string, t *config.TLS, s *config.SASL, props string, role kafka.Role) (kafka.ClientConfig, error) {
	c := kafka.ClientConfig{Brokers: brokers, Logger: env.Log}
	var err error
	if c.Properties, err = kafka.ParseProperties(props); err != nil {
		return c, &config.FieldError{Path: path + ".config", Err: err}
	}
	if err := c.Properties.Check(role); err != nil {
		return c, &config.FieldError{Path: path + ".config", Err: err}
	}
	if unknown := c.Properties.Unknown(role); len(unknown) > 0 {
		env.Log.Warn("kafka config keys sluice does not use are ignored", zap.String("path", path+".config"), zap.Strings("keys", unknown))
	}
	if c.TLS, err = readTLS(t, path+".tls"); err != nil {
		return c, err
	}
	if s != nil {
		if c.SASL, err = kafkaSASL(path+".sasl", s); err != nil {
			return c, err
		}
	}
	return c, nil
}

// kafkaSASL reads the secrets of a validated SASL block at path.
func kafkaSASL(path string, s *config.SASL) (*kafka.SASL, error) {
	out := &kafka.SASL{Mechanism: *s.Mechanism}
	block, plain, _ := s.Block()
	var err error
	if plain == nil { // OAUTHBEARER
		o := s.OAuth
		out.OAuth = &kafka.OAuth{TokenEndpoint: o.TokenEndpoint}
		if out.OAuth.ClientID, err = readSecret(o.ClientID, path+".oauth.clientID"); err != nil {
			return nil, err
		}
		out.OAuth.ClientSecret, err = readSecret(o.ClientSecret, path+".oauth.clientSecret")
		return out, err
	}
	if out.User, err = readSecret(plain.UserSecret, path+"."+block+".userSecret"); err != nil {
		return nil, err
	}
	out.Password, err = readSecret(plain.PasswordSecret, path+"."+block+".passwordSecret")
	return out, err
}

// buildKafkaSink opens the Kafka sink at path.
func kafkaSink(env vertex.Env, path string, k *config.KafkaSink) (isb.Writer, error) {
	client, err := kafkaClient(env, path, k.Brokers, k.TLS, k.SASL, k.Config, kafka.RoleSink)
	if err != nil {
		return nil, err
	}
	w, err := kafka.NewSink(kafka.SinkConfig{Client: client, Topic: k.Topic, SetKey: k.SetKey})
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	env.OnClose(w.Close)
	return w, nil
}
