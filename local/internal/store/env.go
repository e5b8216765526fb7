package store

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketSettings = addBucket("settings")
	keyAccountEnv  = []byte("account_env")
)

// AccountEnv returns the account's environment variables.
func (s *Store) AccountEnv() (map[string]string, error) {
	env := map[string]string{}
	err := s.get(bucketSettings, keyAccountEnv, &env)
	if err == ErrNotFound {
		return map[string]string{}, nil
	}
	return env, err
}

// SetAccountEnv replaces the account's environment variables.
func (s *Store) SetAccountEnv(env map[string]string) error {
	if env == nil {
		env = map[string]string{}
	}
	return s.put(bucketSettings, keyAccountEnv, env)
}

// UpdateAccountEnv changes the account's environment variables in one
// transaction; f's error aborts the change.
func (s *Store) UpdateAccountEnv(f func(map[string]string) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSettings)
		env := map[string]string{}
		if raw := b.Get(keyAccountEnv); raw != nil {
			if err := json.Unmarshal(raw, &env); err != nil {
				return err
			}
		}
		if err := f(env); err != nil {
			return err
		}
		raw, err := json.Marshal(env)
		if err != nil {
			return err
		}
		return b.Put(keyAccountEnv, raw)
	})
}
