// `InventoryStore`, shared by both engines (included).

#[async_trait::async_trait]
impl crate::InventoryStore for ThisStore {}
