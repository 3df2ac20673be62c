//! CatalogService: what this installation offers, converted once at start-up.

use std::sync::Arc;

use einsora_core::catalog::Catalog;
use einsora_proto::catalog::v1::catalog_service_server::CatalogService;
use einsora_proto::catalog::v1::{self as pb};
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth};

#[derive(Debug, Clone)]
pub struct CatalogApi {
    catalog: Arc<pb::Catalog>,
    auth: Arc<Auth>,
}

impl CatalogApi {
    pub fn new(catalog: &Catalog, auth: Arc<Auth>) -> Self {
        CatalogApi {
            catalog: Arc::new(pb::Catalog::from(catalog)),
            auth,
        }
    }
}

#[tonic::async_trait]
impl CatalogService for CatalogApi {
    async fn get_catalog(
        &self,
        request: Request<pb::GetCatalogRequest>,
    ) -> Result<Response<pb::Catalog>, Status> {
        self.auth.caller(request.metadata(), Access::Read).await?;
        Ok(Response::new(pb::Catalog::clone(&self.catalog)))
    }
}
