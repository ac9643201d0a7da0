//! The GitHub client: App and token auth, typed reads with retries, rate limits and conditional requests.
