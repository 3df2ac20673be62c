//! Inventory: machines and the hourly usage records read by the API.

use async_trait::async_trait;

#[async_trait]
pub trait InventoryStore: Send + Sync {}
