// Package cli holds what the commands of the vertex binary share: their
// flags ([FlagSet]), the usage errors that exit with code 2 ([Usagef],
// [IsUsage]), the logger, and loading the config a command is given.
package cli
